"""The preset catalog: every fabric, link, GPU, model and workload preset the
package ships, with what it is and where its numbers come from.

Read from the registries themselves (``FABRIC_PRESETS``, ``LINK_PRESETS``,
``GPU_PRESETS``, ``MODEL_PRESETS``, the shipped traces and generators), so a
preset added anywhere shows up here without editing this module. Sources are
the preset's own ``sources`` field where it has one, else the "Source(s):"
paragraph of its builder's docstring, else the fabric module's bullet for it.
"""

from __future__ import annotations

import inspect
import re
from typing import Any, Callable

__all__ = ["preset_catalog", "docstring_sources"]


def docstring_sources(fn: Callable[..., Any]) -> str:
    """The ``Source:`` / ``Sources:`` paragraph of ``fn``'s docstring, one line ("" if none)."""
    doc = inspect.getdoc(fn) or ""
    m = re.search(r"Sources?:\s*(.*?)(?:\n\s*\n|$)", doc, re.S)
    return " ".join(m.group(1).split()) if m else ""


def _sources_or_pointer(fn: Callable[..., Any]) -> str:
    """The builder's "Sources:" paragraph; else its docstring (which names its
    sources inline); else where its module documents them."""
    src = docstring_sources(fn)
    if src:
        return src
    doc = _first_line(fn)
    if doc:
        return f"as its docstring states: {doc}"
    mod = inspect.getmodule(fn)
    return f"the {mod.__name__} module docstring (each constant's source)" if mod is not None else ""


def _memory_type(fn: Callable[..., Any]) -> str:
    """The device-memory technology a GPU preset's docstring (its datasheet
    summary) names: HBM3e, GDDR6 (Ada parts such as L20/L40) ...; "memory"
    when it names none. The capacity field is called hbm_* on every GPU."""
    m = re.search(r"\b(HBM\w*|GDDR\w*)", inspect.getdoc(fn) or "")
    return m.group(1) if m else "memory"


def _first_line(fn: Callable[..., Any]) -> str:
    doc = inspect.getdoc(fn) or ""
    para = doc.split("\n\n")[0]
    return " ".join(para.split())


def _group(registry: dict[str, Callable[..., Any]]) -> list[tuple[list[str], Callable[..., Any]]]:
    """Registry names grouped by builder (aliases together), in registry order."""
    out: list[tuple[list[str], Callable[..., Any]]] = []
    for name, fn in registry.items():
        for names, f in out:
            if f is fn:
                names.append(name)
                break
        else:
            out.append(([name], fn))
    return out


def _fabric_bullets() -> dict[str, str]:
    import flitsim.hardware.fabric as fab

    doc = fab.__doc__ or ""
    out = {}
    for m in re.finditer(r"^- ``([^`]+)``:(.*?)(?=^- ``|\Z)", doc, re.S | re.M):
        out[m.group(1)] = " ".join(m.group(2).split())
    return out


def preset_catalog() -> "Any":
    """One row per preset: ``kind`` (fabric, link, gpu, model, workload),
    ``name``, ``aliases``, ``what`` (one line) and ``sources``. Returns a
    pandas DataFrame."""
    import pandas as pd

    from flitsim.hardware import FABRIC_PRESETS, GPU_PRESETS, LINK_PRESETS, SYSTEM_PRESETS, fabric_gpu
    from flitsim.models.zoo import MODEL_PRESETS
    from flitsim.workloads import TRACES

    rows: list[dict[str, str]] = []
    bullets = _fabric_bullets()
    for names, fn in _group(FABRIC_PRESETS):
        spec = fn()
        src = docstring_sources(fn)
        sys_p = next((SYSTEM_PRESETS[n] for n in names if n in SYSTEM_PRESETS), None)
        if not src and sys_p is not None:
            src = "; ".join(sys_p().sources) if callable(sys_p) else "; ".join(sys_p.sources)
        if not src:
            src = next((bullets[n] for n in names if n in bullets), "")
        if not src:
            src = _sources_or_pointer(fn)
        gpu = fabric_gpu(spec) or "?"
        rows.append({"kind": "fabric", "name": names[0], "aliases": ", ".join(names[1:]),
                     "what": f"{spec.gpus} GPUs ({gpu}); {_first_line(fn)}", "sources": src or "(none stated)"})
    for names, fn in _group(LINK_PRESETS):
        rows.append({"kind": "link", "name": names[0], "aliases": ", ".join(names[1:]),
                     "what": _first_line(fn) or names[0], "sources": _sources_or_pointer(fn) or "(none stated)"})
    for names, fn in _group(GPU_PRESETS):
        g = fn()
        src = "; ".join(g.sources)
        extra = []
        if getattr(g, "assumed", ()):
            extra.append("assumed: " + ", ".join(g.assumed))
        if getattr(g, "efficiency_source", ""):
            extra.append("efficiencies: " + g.efficiency_source)
        rows.append({"kind": "gpu", "name": names[0], "aliases": ", ".join(names[1:]),
                     "what": f"{g.name}: {g.peak_bf16_flop_per_s / 1e12:,.0f} TFLOP/s dense BF16, "
                             f"{g.hbm_capacity_bytes / 1e9:,.0f} GB {_memory_type(fn)} at "
                             f"{g.hbm_bytes_per_s / 1e12:.2f} TB/s",
                     "sources": "; ".join([src or "(none stated)"] + extra)})
    for names, fn in _group(MODEL_PRESETS):
        m = fn()
        rows.append({"kind": "model", "name": names[0], "aliases": ", ".join(names[1:]),
                     "what": f"{m.kind}: {_first_line(fn)}", "sources": "; ".join(m.sources) or "(none stated)"})
    for name, (file, _cols, tok) in TRACES.items():
        rows.append({"kind": "workload", "name": name, "aliases": "",
                     "what": f"shipped request trace (flitsim/data/{file}); tokens counted by the {tok}",
                     "sources": "Azure Public Dataset, Azure LLM inference trace 2023 (conversation; CC BY 4.0); "
                                "Patel et al., Splitwise, ISCA 2024 (flitsim/data/README.md)"
                     if name.startswith("azure") else "(none stated)"})
    rows.append({"kind": "workload", "name": "llmperf", "aliases": "",
                 "what": "LLMPerf-style synthetic requests: normal input/output lengths (scenario kind llmperf)",
                 "sources": "ray-project/llmperf token_benchmark_ray.py (mean/stddev input and output tokens)"})
    rows.append({"kind": "workload", "name": "dit", "aliases": "",
                 "what": "one DiT image request: resolution, steps, batch (scenario kind dit)",
                 "sources": "image tokens from the model's VAE factor and patch size (model sources)"})
    return pd.DataFrame(rows, columns=["kind", "name", "aliases", "what", "sources"])
