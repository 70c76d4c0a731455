"""A scenario case's workload: loading it (DiT, one prefill, an LLMPerf
distribution or a trace) and choosing the representative prefill lengths an
LLM length distribution is run at (input-length quantiles at the bin
midpoints (i + 0.5) / n, each standing for an equal share of requests)."""

from __future__ import annotations

from typing import Any

import numpy as np

from flitsim.errors import config_error
from flitsim.models import model_preset
from flitsim.scenario.spec import CaseSection, MapWorkload, Scenario
from flitsim.workloads import dit_workload, llmperf_workload, load_trace

__all__ = ["load_workload", "representatives", "info_kind"]


def representatives(wl: Any, n: int) -> tuple[list[int], str]:
    """The ``n`` representative prefill lengths (tokens, >= 1) of an LLM
    workload: its input-length quantiles at (i + 0.5) / n; and a one-line
    description of the distribution for the report."""
    inp = wl.requests.input_tokens.to_numpy()
    qs = (np.arange(n) + 0.5) / n
    reps = [max(1, int(round(float(np.quantile(inp, q))))) for q in qs]
    desc = (f"{wl.source.split('(')[0] or 'workload'}: {len(inp)} requests, input mean {inp.mean():.0f}, p50 "
            f"{np.median(inp):.0f}, p99 {np.quantile(inp, 0.99):.0f}; run at {n} midpoint quantiles "
            f"{[round(float(q), 3) for q in qs]} = {reps} tokens")
    return reps, desc


def load_workload(case: CaseSection | MapWorkload, sc: Scenario) -> tuple[Any, dict[str, Any]]:
    """(workload, info) of a case (or a map row): the DiT or LLM workload object (None for
    ``kind = "tokens"``) and the facts the report prints (``kind`` "dit" or
    "llm", ``reps`` the prefill lengths to run, tokenizer, distribution).

    Raises:
        ConfigError: a DiT without model / resolution_px, an LLM workload
            without a model, ``tokens`` missing, an unknown model or trace.
    """
    w = case.workload
    if w.kind == "dit":
        if w.model is None or w.resolution_px is None:
            raise config_error(f"cases.{case.name}.workload", w.kind, "model and resolution_px for kind = 'dit'")
        px = w.resolution_px if w.width_px is None else (w.resolution_px, w.width_px)
        d = dit_workload(w.model, px, steps=w.steps, batch=w.batch, frames=w.frames)
        info = {"kind": "dit", "model": w.model, "tokens": f"{d.image_tokens} image + {d.text_tokens_} text tokens, "
                f"{w.steps} steps, batch {d.step_batch}", "workload": d}
        return d, info
    if case.model is None:
        raise config_error(f"cases.{case.name}.model", None, "a causal LLM for an LLM workload")
    served = "llama-3" if "llama-3" in case.model.lower() else case.model
    if w.kind == "tokens":
        if w.tokens is None:
            raise config_error(f"cases.{case.name}.workload.tokens", None, "an integer >= 1 for kind = 'tokens'")
        return None, {"kind": "llm", "reps": [w.tokens], "tokens": "prefill input tokens", "tokenizer": served,
                      "served_tokenizer": served, "distribution": f"one prefill of {w.tokens} tokens"}
    if w.kind == "llmperf":
        wl = llmperf_workload(**w.llmperf)
    else:
        wl = load_trace(w.trace, limit=w.limit)
    model_preset(case.model)
    reps, desc = representatives(wl, w.sequences)
    return wl, {"kind": "llm", "reps": reps, "tokens": "prefill input tokens (one request per prefill)",
                "tokenizer": wl.tokenizer, "served_tokenizer": served, "distribution": desc, "workload": wl}


def info_kind(info: dict[str, Any]) -> str:
    """``"dit"`` or ``"llm"``: the kind of a :func:`load_workload` info dict."""
    return str(info.get("kind"))
