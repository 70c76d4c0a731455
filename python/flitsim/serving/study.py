"""A serving study from a TOML file (``flitsim serve examples/serving.toml``):
workloads x fabrics x layouts x policies, each swept over request rates;
answers which policy and layout give the most throughput at the SLO, per
workload (issue 18 point 4: how the choice of "typical" moves the answer).

File layout::

    [serve]                        # shared settings (serve() keyword arguments)
    model = "llama-3-70b"
    dtype = "fp8"
    n = 300                        # requests per point
    slo_ttft_s = 2.0
    slo_tpot_s = 0.1
    policies = ["static", "continuous", "chunked"]

    [[fabric]]
    name = "hgx-h100"
    rates = "1:64"                 # parse_rates syntax
    layouts = [{ tp = 8 }, { tp = 4, replicas = 2 }]

    [[workload]]
    name = "LLMPerf 550/150 (Llama-2 tokens)"
    llmperf = { mean_input_tokens = 550, stddev_input_tokens = 150,
                mean_output_tokens = 150, stddev_output_tokens = 10 }
    recount = "llama-3"            # optional: restate in the served model's tokens
    [[workload]]
    name = "Azure conversation"
    trace = "azure-conv-2023"

    [[disaggregated]]              # optional: prefill / decode split on one fabric
    fabric = "gb200-nvl72"
    prefill = { tp = 8, replicas = 2 }
    decode = { tp = 8, replicas = 7 }
    rates = "8:64"

Tokenizer recount: LLMPerf counts with the Llama-2 tokenizer; the served
Llama-3 model sees the same text as fewer tokens. ``recount = "llama-3"``
converts with :data:`TOKENIZER_CHARS_PER_TOKEN` (characters per token;
measure your own with :func:`flitsim.workloads.tokenizer_ratio` when both
tokenizer.json files are at hand) and reports throughput in both units.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from flitsim.errors import ConfigError, check_int, config_error
from flitsim.serving.serve import Layout, parse_rates, serve

__all__ = ["TOKENIZER_CHARS_PER_TOKEN", "read_study", "run_study", "best_at_slo"]

TOKENIZER_CHARS_PER_TOKEN = {"llama-2": 3.2, "llama-3": 4.0}
"""Characters per token of English text (approximate; Llama-3's 128K
vocabulary packs about 4.0, Llama-2's 32K about 3.2: ~20 % fewer tokens for
the same text). A labelled default: measure yours on your corpus."""

_SERVE_KEYS = {"model", "dtype", "kv_dtype", "n", "policy", "max_num_batched_tokens", "max_num_seqs", "block_tokens",
               "memory_utilization", "arrival", "cv", "seed", "network", "fidelity", "execution", "kv_fidelity",
               "contention", "gpu"}


def read_study(path: str) -> dict[str, Any]:
    """Parse and check a study file (module docstring).

    Raises:
        ConfigError: unreadable TOML, missing sections, unknown keys.
    """
    from flitsim._toml import read_toml

    d = read_toml(path, "serving study")
    for key in ("serve", "fabric", "workload"):
        if key not in d:
            raise config_error(f"{path}: [{key}]", None, "a [serve] table, [[fabric]] and [[workload]] entries")
    bad = set(d["serve"]) - _SERVE_KEYS - {"slo_ttft_s", "slo_tpot_s", "policies"}
    if bad:
        raise config_error(f"{path}: serve", sorted(bad), f"keys among {sorted(_SERVE_KEYS | {'slo_ttft_s', 'slo_tpot_s', 'policies'})}")
    return d


def _workload(w: dict[str, Any], n: int) -> tuple[str, Any, str]:
    from flitsim.workloads import LLMPerfSpec, TokenizerRatio, convert_workload, llmperf_workload, load_trace

    name = str(w.get("name", "workload"))
    if "trace" in w:
        wl = load_trace(w["trace"], w.get("columns"), limit=n)
    elif "llmperf" in w:
        wl = llmperf_workload(LLMPerfSpec(**{"n_requests": n, **w["llmperf"]}))
    else:
        raise config_error(f"workload {name!r}", w, "a 'trace' or an 'llmperf' table")
    rc = w.get("recount")
    if rc is not None:
        cpt = TOKENIZER_CHARS_PER_TOKEN
        if rc not in cpt or wl.tokenizer not in cpt:
            raise config_error(f"workload {name!r}.recount", rc, f"one of {sorted(cpt)} (from {wl.tokenizer!r})")
        wl = convert_workload(wl, TokenizerRatio(cpt[wl.tokenizer], cpt[rc], wl.tokenizer, rc))
    return name, wl, wl.tokenizer


def _check_study(study: dict[str, Any], model: Any, policies: Any) -> None:
    """What every point of a study shares, checked once before the first point.

    Raises:
        ConfigError: an unknown or non-causal model, policy or fabric preset;
            an empty ``policies``, ``layouts``, ``[[fabric]]`` or
            ``[[workload]]`` list; two workloads of one name; an entry key the
            study does not read; a workload with both ``trace`` and
            ``llmperf``; ``rates`` that do not parse; a ``[serve]``
            ``fidelity`` / ``kv_fidelity`` other than packet / flow / auto, or
            ``max_num_seqs`` / ``max_num_batched_tokens`` / ``block_tokens`` /
            ``seed`` that is not an integer in range.
    """
    from flitsim.hardware.fabric import as_fabric
    from flitsim.models.zoo import as_model
    from flitsim.serving.scheduler import POLICIES

    cfg = as_model(model)
    if cfg.kind != "causal":  # was an error row per point, exit 0
        raise config_error("serve.model", model, "a causal LLM to serve")
    if not isinstance(policies, list) or not policies or any(p not in POLICIES for p in policies):
        raise config_error("serve.policies", policies, f"a non-empty list among {list(POLICIES)}")
    for key in ("fabric", "workload"):
        if not isinstance(study.get(key), list) or not study[key]:
            raise config_error(f"[[{key}]]", study.get(key), "at least one entry")
    names = [str(w.get("name", "workload")) for w in study["workload"]]
    dup = sorted({x for x in names if names.count(x) > 1})
    if dup:  # best_at_slo groups by name: two workloads of one name would be ranked together
        raise config_error("[[workload]].name", dup[0], "distinct workload names")
    for i, w in enumerate(study["workload"]):
        _check_keys(f"[[workload]] {i}", w, _WORKLOAD_KEYS)
        if "trace" in w and "llmperf" in w:  # the llmperf table was silently ignored
            raise config_error(f"[[workload]] {i} ({w.get('name', 'workload')!r})", sorted(w),
                               "either 'trace' or 'llmperf', not both")
    entries = [("fabric", i, f, f.get("name")) for i, f in enumerate(study["fabric"])]
    entries += [("disaggregated", i, f, f.get("fabric")) for i, f in enumerate(study.get("disaggregated", []))]
    for where, i, f, name in entries:
        _check_keys(f"[[{where}]] {i}", f, _FABRIC_KEYS if where == "fabric" else _DISAGG_KEYS)
        try:
            as_fabric(name)
        except ConfigError as e:
            raise config_error(f"[[{where}]] {i} fabric", name, str(e)) from None
        if "layouts" in f and (not isinstance(f["layouts"], list) or not f["layouts"]):
            raise config_error(f"fabric {name!r}.layouts", f["layouts"], "a non-empty list of layouts ({ tp = 8 }, ...)")
        fab = as_fabric(name)
        for j, lay in enumerate(f.get("layouts", []) if where == "fabric" else []):
            L = Layout.of(lay)  # a layout larger than the fabric was an error row per point (exit 0)
            if L.first_gpu + L.gpus > fab.gpus:
                raise config_error(f"fabric {name!r}.layouts.{j}", L.label(), f"a layout within {fab.name}'s "
                                   f"{fab.gpus} GPUs (needs GPUs {L.first_gpu}..{L.first_gpu + L.gpus - 1})")
        if "rates" in f:
            if not isinstance(f["rates"], str):  # a number raised TypeError from the parser
                raise config_error(f"[[{where}]] {i} rates", f["rates"], "a string: 'lo:hi', 'lo:hi:n' or 'r1,r2,...'")
            parse_rates(f["rates"])
    sv = study.get("serve", {})
    for key in ("fidelity", "kv_fidelity"):  # one value for every point: a typo was an error row per point (exit 0)
        if key in sv and sv[key] not in ("packet", "flow", "auto"):
            raise config_error(f"serve.{key}", sv[key], "one of 'packet', 'flow', 'auto'")
    for key, lo in (("max_num_seqs", 1), ("max_num_batched_tokens", 1), ("block_tokens", 1), ("seed", 0)):
        if key in sv:
            check_int(f"serve.{key}", sv[key], lo)


_WORKLOAD_KEYS = {"name", "trace", "columns", "llmperf", "recount"}
_FABRIC_KEYS = {"name", "rates", "layouts"}
_DISAGG_KEYS = {"fabric", "prefill", "decode", "rates", "policy"}


def _check_keys(where: str, entry: Any, allowed: set[str]) -> None:
    """Refuse an entry that is not a table or has a key the study does not read
    (a typo such as ``ratez`` was ignored and the default used)."""
    if not isinstance(entry, dict):
        raise config_error(where, entry, "a table")
    bad = sorted(set(entry) - allowed)
    if bad:
        raise config_error(where, bad, f"keys among {sorted(allowed)}")


def run_study(study: dict[str, Any], *, rates: str | None = None, n: int | None = None,
              progress: Any = None) -> Any:
    """Run every (workload, fabric, layout, policy) over its rates.

    Args:
        rates: override every entry's rates (parse_rates syntax).
        n: override requests per point.

    Returns:
        DataFrame, one row per point: workload, tokenizer, fabric, layout,
        policy, rate_rps and the :meth:`ServeResult.summary` columns, plus
        ``goodput_rps`` at the study's SLO.
    """
    import pandas as pd

    s = dict(study["serve"])
    slo = {"slo_ttft_s": s.pop("slo_ttft_s", None), "slo_tpot_s": s.pop("slo_tpot_s", None)}
    policies = s.pop("policies", [s.pop("policy", "chunked")])
    npts = check_int("serve.n" if n is None else "n", n if n is not None else s.pop("n", 300), 1)
    s.pop("n", None)
    model = s.pop("model")
    _check_study(study, model, policies)  # a typo would otherwise become an error row per point (exit 0)
    rows: list[dict[str, Any]] = []
    works = [_workload(w, npts) for w in study["workload"]]
    entries: list[tuple[Any, ...]] = []
    for f in study["fabric"]:
        for lay in f.get("layouts", [{"tp": 1}]):
            for pol in policies:
                entries.append((f["name"], Layout.of(lay), pol, None, rates or f.get("rates", "1:64")))
    for dz in study.get("disaggregated", []):
        entries.append((dz["fabric"], None, dz.get("policy", "chunked"),
                        {"prefill": dz["prefill"], "decode": dz["decode"]}, rates or dz.get("rates", "1:64")))
    for wname, wl, tok in works:
        for fab, lay, pol, dis, rr in entries:
            for rate in parse_rates(rr):
                kw = dict(s, fabric=fab, policy=pol, rate=rate, n=npts)
                if dis is None:
                    kw["layout"] = lay
                else:
                    kw["disaggregated"] = dis
                try:
                    res = serve(model, wl, **kw)
                except ConfigError as e:
                    rows.append({"workload": wname, "tokenizer": tok, "fabric": fab,
                                 "layout": lay.label() if lay else "disaggregated", "policy": pol, "rate_rps": rate,
                                 "error": str(e)})
                    continue
                row = {"workload": wname, "tokenizer": tok, "fabric": fab, "layout": res.config["layout"],
                       "policy": pol, "rate_rps": rate, **res.summary()}
                if any(v is not None for v in slo.values()):
                    row["goodput_rps"] = res.goodput_rps(**{k: v for k, v in slo.items() if v is not None})
                    row["goodput_share"] = row["goodput_rps"] / row["request_throughput_rps"]
                rows.append(row)
                if progress is not None:
                    progress(row)
    return pd.DataFrame(rows)


def best_at_slo(df: Any, min_share: float = 0.9) -> Any:
    """Per workload and fabric: the (layout, policy) with the highest request
    rate whose SLO attainment (goodput / throughput) is at least ``min_share``
    (DistServe's goodput notion: the highest rate served at >= 90 % SLO
    attainment), with its output tokens/s there."""
    import pandas as pd

    if "goodput_share" not in df:
        raise config_error("slo", None, "slo_ttft_s and/or slo_tpot_s in [serve] to rank at an SLO")
    ok = df[df["goodput_share"] >= min_share]
    rows: list[dict[str, Any]] = []
    for (w, f), g in df.groupby(["workload", "fabric"], sort=False):
        okg = ok[(ok.workload == w) & (ok.fabric == f)]
        if okg.empty:
            rows.append({"workload": w, "fabric": f, "best_layout": None, "best_policy": None,
                         "rate_at_slo_rps": 0.0, "output_tokens_per_s_at_slo": 0.0})
            continue
        top = okg.sort_values(["rate_rps", "output_tokens_per_s"], ascending=False).iloc[0]
        rows.append({"workload": w, "fabric": f, "tokenizer": top["tokenizer"], "best_layout": top["layout"],
                     "best_policy": top["policy"], "rate_at_slo_rps": float(top["rate_rps"]),
                     "output_tokens_per_s_at_slo": float(top["output_tokens_per_s"]),
                     "p99_tpot_s": float(top["p99_tpot_s"]), "p99_ttft_s": float(top["p99_ttft_s"])})
    return pd.DataFrame(rows)
