"""Generated documentation: the validation tables of README.md,
docs/validation.md, docs/collectives.md and docs/compute.md are rewritten from the registry
and the last full run, never typed by hand.

    python -m flitsim.validation.docs            # run every case, write docs/validation.json + the docs
    python -m flitsim.validation.docs --record   # re-render from docs/validation.json (no simulation)
    python -m flitsim.validation.docs --check    # exit 1 if a marked section or the record is stale
    python -m flitsim.validation.docs --update faults.   # rerun some cases only, merge into the record

A marked section is the text between ``<!-- validation:NAME -->`` and
``<!-- /validation:NAME -->``. ``docs/validation.json`` records the last full
run (``flitsim validate --write-docs``): each case's simulated value with the
case's definition (measured value, tolerance, tag, source), so a change to a
case without a rerun is caught (:func:`check`), and the CI subset, rerun by
the test suite, is compared with it value by value."""

from __future__ import annotations

import json
import math
import re
import sys
from pathlib import Path
from typing import Any, Sequence

from flitsim.errors import ConfigError
from flitsim.validation import format as fmt
from flitsim.validation.case import Case, Outcome
from flitsim.validation.registry import all_cases
from flitsim.validation.runner import Report, _row

RECORD = Path("docs") / "validation.json"
FILES = {"README.md": ("readme-summary", "readme-collectives"),
         "docs/validation.md": ("validation-summary", "validation-misses", "validation-cases"),
         "docs/collectives.md": ("collectives-table",),
         "docs/compute.md": ("compute-table",)}
FINGERPRINT = ("area", "quantity", "unit", "source", "measured", "tolerance", "tag", "fitted", "system",
               "size_band", "fabric", "error", "known_miss", "call", "fast")


def default_root() -> Path:
    """The source checkout this package sits in (python/flitsim/validation -> repo), else the cwd."""
    here = Path(__file__).resolve().parents[3]
    return here if (here / "README.md").is_file() and (here / "docs").is_dir() else Path.cwd()


def fingerprint(c: Case) -> dict[str, Any]:
    return {k: getattr(c, k) for k in FINGERPRINT}


def to_record(rep: Report) -> dict[str, Any]:
    """The record of a full run (JSON-able)."""
    from flitsim._core import __version__

    cases = {}
    for o in rep.outcomes:
        cases[o.case.id] = {**fingerprint(o.case), "simulated": o.simulated, "rel_error": o.error,
                            "verdict": o.verdict, "note": o.note, "ran_on": o.fabric, "wall_s": round(o.wall_s, 3)}
    return {"flitsim_version": __version__, "cases": cases}


def record_problems(rec: dict[str, Any]) -> list[str]:
    """What in the record no longer matches the registry (empty: current)."""
    probs = []
    got = rec.get("cases", {})
    reg = {c.id: c for c in all_cases()}
    for cid in sorted(set(reg) - set(got)):
        probs.append(f"case {cid}: in the registry, not in {RECORD} (rerun: flitsim validate --write-docs)")
    for cid in sorted(set(got) - set(reg)):
        probs.append(f"case {cid}: in {RECORD}, no longer in the registry")
    for cid in sorted(set(reg) & set(got)):
        want = fingerprint(reg[cid])
        have = {k: got[cid].get(k) for k in FINGERPRINT}
        diff = [k for k in FINGERPRINT if want[k] != have[k]]
        if diff:
            probs.append(f"case {cid}: changed since the last full run ({', '.join(diff)})")
    return probs


def from_record(rec: dict[str, Any]) -> Report:
    """The report the record describes, on the registry's cases.

    Raises:
        ConfigError: the record does not match the registry (see :func:`record_problems`).
    """
    probs = record_problems(rec)
    if probs:
        raise ConfigError(f"{RECORD} is stale: " + "; ".join(probs[:5]) + (" ..." if len(probs) > 5 else ""))
    outs = []
    for c in all_cases():
        r = rec["cases"][c.id]
        outs.append(Outcome(c, r["simulated"], r["rel_error"], r["verdict"], r["note"], r["ran_on"], r["wall_s"]))
    return Report(tuple(outs))


def load_record(root: Path) -> dict[str, Any]:
    p = root / RECORD
    if not p.is_file():
        raise ConfigError(f"record = {str(p)!r}: missing; run `flitsim validate --write-docs`")
    return json.loads(p.read_text(encoding="utf-8"))


def _collective_bands(rep: Report) -> str:
    outs = [o for o in rep.outcomes if o.case.area == "collectives" and o.error is not None]
    order = {"< 1 MiB": 0, "1 MiB .. 256 MiB": 1, ">= 256 MiB": 2}
    keys = sorted({(o.case.system, o.case.size_band) for o in outs}, key=lambda k: (k[0], order.get(k[1], 3), k[1]))
    rows = []
    for system, band in keys:
        sel = [o for o in outs if (o.case.system, o.case.size_band) == (system, band)]
        for tag in ("calibration", "transfer"):
            ts = [o for o in sel if o.case.tag == tag]
            if ts:
                r = _row(tag, system, ts)
                rows.append([system, band, tag, str(r.cases), fmt.pct(r.mape_pct, False), fmt.pct(r.worst_pct, False),
                             r.worst_id.removeprefix("collectives.")])
    if outs:
        for tag in ("calibration", "transfer"):
            ts = [o for o in outs if o.case.tag == tag]
            if ts:
                r = _row(tag, "all", ts)
                rows.append(["all", "all", tag, str(r.cases), fmt.pct(r.mape_pct, False), fmt.pct(r.worst_pct, False),
                             r.worst_id.removeprefix("collectives.")])
    return fmt.markdown(["system", "size band", "tag", "points", "MAPE %", "worst %", "worst case"], rows, (3, 4, 5))


def _collective_table(rep: Report) -> str:
    rows = []
    for o in rep.outcomes:
        c = o.case
        if c.area != "collectives":
            continue
        ran = o.note.split(";")[0] if o.note and "/" in o.note.split(";")[0] else "-"
        rows.append([c.quantity, c.unit, fmt.num(c.measured), fmt.num(o.simulated), ran,
                     fmt.pct(None if o.error is None else 100 * o.error), c.tag, o.verdict])
    table = fmt.markdown(["point", "metric", "measured", "simulated", "algo/proto", "time error %", "tag", "verdict"],
                         rows, (2, 3, 5))
    return (table + "\n\nMAPE of time (|error|), calibration and transfer apart:\n\n" + _collective_bands(rep))


def _compute_table(rep: Report) -> str:
    rows = []
    for o in rep.outcomes:
        c = o.case
        if c.area != "single_gpu":
            continue
        rows.append([c.quantity, fmt.num(c.measured), fmt.num(o.simulated),
                     fmt.pct(None if o.error is None else 100 * o.error), c.tag, o.verdict])
    return fmt.markdown(["row", "measured s", "model s", "error %", "tag", "verdict"], rows, (1, 2, 3))


def _misses(rep: Report) -> str:
    lines = []
    for label, verdict in (("Failed", "fail"), ("Known misses", "known miss"), ("Skipped (not run; never a pass)", "skipped")):
        sel = [o for o in rep.outcomes if o.verdict == verdict]
        lines.append(f"**{label}: {len(sel)}.**" + ("" if sel else " None."))
        lines.append("")
        for o in sel:
            err = "" if o.error is None else f" ({100 * o.error:+.1f} % against ±{100 * o.case.tolerance:.0f} %)"
            lines.append(f"- `{o.case.id}`{err}: {o.note}")
        if sel:
            lines.append("")
    return "\n".join(lines).rstrip()


def _cases(rep: Report) -> str:
    parts = []
    for area in sorted({o.case.area for o in rep.outcomes}, key=lambda a: [o.case.area for o in rep.outcomes].index(a)):
        sel = [o for o in rep.outcomes if o.case.area == area]
        parts.append(f"### {area}\n")
        parts.append(fmt.markdown(fmt.CASE_HEAD, fmt.case_rows(sel), fmt.CASE_RIGHT))
        parts.append("")
        for o in sel:
            c = o.case
            fit = f" Fitted: {c.fitted}." if c.fitted else ""
            parts.append(f"- `{c.id}`: {c.source}. Tolerance ±{100 * c.tolerance:g} %: {c.tolerance_why}.{fit} "
                         f"Call: `{c.call}`.")
        parts.append("")
    return "\n".join(parts).rstrip()


def sections(rep: Report) -> dict[str, str]:
    """Every generated section's Markdown, by name."""
    summary = fmt.markdown(fmt.SUMMARY_HEAD, fmt.summary_rows(rep.summary()), fmt.SUMMARY_RIGHT)
    head = "\n".join(f"- {h}" for h in fmt.headline(rep))
    return {"readme-summary": summary + "\n\n" + head,
            "readme-collectives": _collective_bands(rep),
            "validation-summary": summary + "\n\n" + head,
            "validation-misses": _misses(rep),
            "validation-cases": _cases(rep),
            "collectives-table": _collective_table(rep),
            "compute-table": _compute_table(rep)}


def _marker(name: str) -> re.Pattern[str]:
    return re.compile(rf"(<!-- validation:{re.escape(name)} -->\n)(.*?)(<!-- /validation:{re.escape(name)} -->)", re.S)


def rewrite(root: Path, secs: dict[str, str], check: bool = False) -> list[str]:
    """Rewrite (or, with ``check``, compare) every marked section under ``root``.
    Returns the stale ``file: section`` names.

    Raises:
        ConfigError: a file without its markers.
    """
    stale = []
    for rel, names in FILES.items():
        p = root / rel
        if not p.is_file():
            raise ConfigError(f"docs file = {str(p)!r}: missing")
        text = p.read_text(encoding="utf-8")
        new = text
        for name in names:
            pat = _marker(name)
            if not pat.search(new):
                raise ConfigError(f"{rel}: no <!-- validation:{name} --> ... <!-- /validation:{name} --> markers")
            body = "\n" + secs[name].rstrip() + "\n\n"
            new = pat.sub(lambda m: m.group(1) + body + m.group(3), new, count=1)
            if pat.search(text) and pat.search(text).group(2) != body:  # type: ignore[union-attr]
                stale.append(f"{rel}: {name}")
        if not check and new != text:
            p.write_text(new, encoding="utf-8")
    return stale


def check(root: Path | None = None) -> list[str]:
    """Problems that make the generated docs stale (empty: current)."""
    root = root or default_root()
    rec = load_record(root)
    probs = record_problems(rec)
    if probs:
        return probs
    return [f"stale section {s} (rerun: python -m flitsim.validation.docs --record)"
            for s in rewrite(root, sections(from_record(rec)), check=True)]


def write(rep: Report | None = None, root: Path | None = None) -> list[str]:
    """Write the record of ``rep`` (a full run) and every marked section; with
    ``rep`` None, re-render from the existing record. Returns the sections changed.

    Raises:
        ConfigError: ``rep`` is not a full default run (a selection, another
            fabric or a calibration would misstate the docs).
    """
    root = root or default_root()
    if rep is not None:
        ids = [o.case.id for o in rep.outcomes]
        if ids != [c.id for c in all_cases()] or rep.fabric or rep.calibration or rep.fast:
            raise ConfigError("write-docs: needs a full run of every case with the defaults (no --case/--tag/"
                              "--fabric/--calibration/--fast)")
        rec = to_record(rep)
        (root / RECORD).write_text(json.dumps(rec, indent=1, sort_keys=True, default=_json) + "\n", encoding="utf-8")
    else:
        rep = from_record(load_record(root))
    return rewrite(root, sections(rep))


def update(case_ids: Sequence[str], root: Path | None = None) -> list[str]:
    """Rerun only ``case_ids`` (ids or area prefixes), put their outcomes into
    the existing record (cases no longer registered are dropped), and
    re-render. For adding or changing a few cases without a full run; the
    record must then match the registry (else ConfigError names what is missing).
    Returns the sections changed."""
    from flitsim.validation.runner import run

    root = root or default_root()
    p = root / RECORD
    rec = load_record(root) if p.is_file() else {"cases": {}}
    rep = run(case_ids, progress=lambda o: print(f"{o.case.id}: {o.verdict}", flush=True))
    new = to_record(rep)
    reg = {c.id for c in all_cases()}
    cases = {k: v for k, v in rec["cases"].items() if k in reg}
    cases.update(new["cases"])
    rec = {"flitsim_version": new["flitsim_version"], "cases": cases}
    p.write_text(json.dumps(rec, indent=1, sort_keys=True, default=_json) + "\n", encoding="utf-8")
    return rewrite(root, sections(from_record(rec)))


def _json(o: Any) -> Any:
    if isinstance(o, float) and not math.isfinite(o):
        return None
    raise TypeError(type(o).__name__)


def main(argv: Sequence[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    flags = {"--check", "--update", "--record"}
    unknown = [a for a in args if a.startswith("-") and a not in flags]
    if unknown or (args and "--update" not in args and not flags & set(args)):
        # an unknown flag (--help) must not start the whole re-run
        print(__doc__)
        return 0 if unknown in (["--help"], ["-h"]) else 2
    if "--check" in args:
        probs = check()
        for p in probs:
            print(p)
        return 1 if probs else 0
    if "--update" in args:
        ids = [a for a in args if not a.startswith("--")]
        if not ids:
            print("usage: python -m flitsim.validation.docs --update CASE_OR_AREA_PREFIX ...")
            return 2
        changed = update(ids)
    elif "--record" in args:
        changed = write(None)
    else:
        from flitsim.validation.runner import run

        changed = write(run(progress=lambda o: print(f"{o.case.id}: {o.verdict}", flush=True)))
    print("rewrote: " + (", ".join(changed) if changed else "nothing (already current)"))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
