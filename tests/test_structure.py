"""The package's structure: no circular imports among python/flitsim modules and
no import that points up a layer (docs/architecture.md draws the layers).

Imports are read from the source (ast), function-local ones included, so a
lazy import cannot hide a circle or an upward dependency. Imports under
``if TYPE_CHECKING:`` name types only: they count for the layer rule, not for
circles."""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PKG = ROOT / "python" / "flitsim"

# Layers, lowest first (docs/architecture.md). A module may import its own layer
# and the ones below; circles inside a layer are caught by the circle test.
# Keys are module names or package prefixes; the longest matching key wins.
# Private helpers (``flitsim._name``) are the base layer unless listed.
LAYERS: list[tuple[str, ...]] = [
    ("flitsim._core", "flitsim._core_types", "flitsim.errors", "flitsim.limits", "flitsim.sizes", "flitsim.interrupt",
     "flitsim._spec", "flitsim._toml", "flitsim.parallel"),
    ("flitsim.hardware",),
    # One component or one kind of work at a time: links, switches, fabrics,
    # collectives on a fabric; models, compute costs, workloads.
    ("flitsim.ledger", "flitsim.ledger_graph", "flitsim.linklab", "flitsim.switchlab", "flitsim.transfers", "flitsim.counters", "flitsim.collectives", "flitsim.routing",
     "flitsim.nccl_log", "flitsim.calibrate",
     "flitsim.faults", "flitsim.models", "flitsim.cost", "flitsim.workloads"),
    ("flitsim.networks",),
    ("flitsim.taskgraph", "flitsim.memory"),
    ("flitsim.schedules", "flitsim.serving"),
    ("flitsim.report",),
    ("flitsim.scenario", "flitsim.sweeps", "flitsim.planner", "flitsim.validation", "flitsim.catalog"),
    ("flitsim.cli", "flitsim"),
]


def _module_name(path: Path) -> str:
    rel = path.relative_to(PKG.parent).with_suffix("")
    parts = list(rel.parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


MODULES = {_module_name(p): p for p in sorted(PKG.rglob("*.py"))}
NATIVE = {"flitsim._core"}  # the extension module: imports nothing from flitsim


def layer_of(mod: str) -> int:
    best, rank = "", None
    for k, names in enumerate(LAYERS):
        for n in names:
            # "flitsim" is the package's __init__ only, not a prefix of everything.
            prefix = n != "flitsim" and mod.startswith(n + ".")
            if (mod == n or prefix) and len(n) > len(best):
                best, rank = n, k
    if rank is None and mod.split(".")[1].startswith("_"):
        return 0
    assert rank is not None, f"{mod}: not in a layer; add it to LAYERS here and to docs/architecture.md"
    return rank


def _resolve(name: str) -> str | None:
    """The flitsim module an imported dotted name refers to (a module, or the
    module defining the imported attribute)."""
    while name:
        if name in MODULES or name in NATIVE:
            return name
        name = name.rpartition(".")[0]
    return None


def _is_type_checking(test: ast.expr) -> bool:
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING")


def imports_of(mod: str) -> list[tuple[str, int, bool]]:
    """(imported flitsim module, line, type-only) for every import in ``mod``."""
    path = MODULES[mod]
    tree = ast.parse(path.read_text(), str(path))
    package = mod if path.name == "__init__.py" else mod.rpartition(".")[0]
    out: list[tuple[str, int, bool]] = []

    def visit(node: ast.AST, type_only: bool) -> None:
        if isinstance(node, ast.If) and _is_type_checking(node.test):
            for c in node.body:
                visit(c, True)
            for c in node.orelse:
                visit(c, type_only)
            return
        names: list[str] = []
        if isinstance(node, ast.Import):
            names = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                up = package.split(".")
                up = up[: len(up) - node.level + 1]
                base = ".".join(up + ([base] if base else []))
            names = [f"{base}.{a.name}" for a in node.names]
        for n in names:
            if n == "flitsim" or n.startswith("flitsim."):
                target = _resolve(n)
                if target is not None and target != mod:
                    out.append((target, node.lineno, type_only))
        for c in ast.iter_child_nodes(node):
            visit(c, type_only)

    visit(tree, False)
    return out


def test_every_module_has_a_layer():
    for mod in MODULES:
        layer_of(mod)


def test_no_import_points_up_a_layer():
    bad = []
    for mod in MODULES:
        me = layer_of(mod)
        for target, line, _ in imports_of(mod):
            if layer_of(target) > me:
                bad.append(f"{MODULES[mod].relative_to(ROOT)}:{line}: {mod} (layer {me}) imports {target} "
                           f"(layer {layer_of(target)})")
    assert not bad, "imports that point up a layer:\n" + "\n".join(bad)


def _cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components with more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on: set[str] = set()
    out: list[list[str]] = []

    def strong(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on.add(v)
        for w in sorted(graph[v]):
            if w not in index:
                strong(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                out.append(sorted(comp))

    for v in sorted(graph):
        if v not in index:
            strong(v)
    return out


def import_graph() -> dict[str, set[str]]:
    """Module -> modules it imports at run time (type-only imports left out).
    A package's ``__init__`` importing its own submodules is the package
    assembling itself, not a dependency of the submodules on it; a submodule
    importing its package's ``__init__`` would close a circle and is kept."""
    g = {mod: {t for t, _, type_only in imports_of(mod) if not type_only} for mod in MODULES}
    return {**g, **{m: set() for m in NATIVE}}


# Circles known and being removed elsewhere, tolerated exactly as listed (a circle
# that grows or a new one fails). The models circle (config -> cost -> zoo ->
# config) is gone: models/zoo.as_model, models/hf.py, models/entries.py.
KNOWN_CIRCLES: list[list[str]] = []


def test_no_circular_imports():
    circles = [c for c in _cycles(import_graph()) if c not in KNOWN_CIRCLES]
    assert not circles, "circular imports:\n" + "\n".join(" <-> ".join(c) for c in circles)


def test_the_checks_can_fail():
    # The checkers themselves: a planted circle and a planted upward import are found.
    assert _cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
    assert layer_of("flitsim.report.metrics") > layer_of("flitsim.taskgraph") > layer_of("flitsim.networks")
    assert layer_of("flitsim.transfers") < layer_of("flitsim.networks")
    assert layer_of("flitsim._anything") == 0


def test_moved_names_say_where_they_went():
    import pytest

    import flitsim
    import flitsim.report

    with pytest.raises(AttributeError, match="moved to flitsim.scenario.run_scenario"):
        flitsim.report.run_scenario  # noqa: B018
    with pytest.raises(AttributeError, match="no attribute 'nope'"):
        flitsim.report.nope  # noqa: B018
    assert flitsim.scenario.run_scenario.__module__ == "flitsim.scenario.run"
