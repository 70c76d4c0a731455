"""The PMF map: rows = workloads, columns = fabrics, each cell = every
feasible schedule of the row simulated on the column's fabric, decided by
:func:`flitsim.report.scorecard.map_verdict` (docs/map.md).

Per cell:

1. :func:`candidates` lists every schedule that applies to the row's workload
   on N GPUs (LLM prefill: TeraPipe uniform and DP, layer pipeline, tensor
   parallel, Ulysses, ring attention; decode: every PP x TP split of N with TP
   dividing the KV heads; DiT: PipeFusion, tensor parallel, Ulysses, ring
   attention, DistriFusion).
2. Each is built (a ConfigError from the builder, e.g. more stages than
   blocks or a degree not dividing the heads, makes it *infeasible* with the
   reason); its static memory is checked first (*oom* cells are not
   simulated); then it is simulated on the column's fabric at the column's
   fidelity (``auto``: flow level where validated against packet level) and
   its memory checked again with the run's communication-buffer peak.
3. The cell: the fastest feasible schedule (the *winner*), the best
   non-pipelined one and the margin between them, the fastest token-level
   pipeline and whether it wins / ties / loses against the best non-pipelined
   schedule, its three PMF matches and the verdict.

What is compared: prefill rows, the latency of one request (TTFT without
queueing); DiT rows, the latency of one image; the decode row, the makespan
of its batch of requests (so its ratio is a batch-throughput ratio), which
the ``compares`` column states per row. Every (cell, schedule) is one
independent, deterministic run, so ``-j N`` gives identical maps.
"""

from __future__ import annotations

import dataclasses
import sys
import time
import warnings
from typing import Any

import numpy as np
import pandas as pd

import flitsim.schedules as S
from flitsim.errors import ConfigError, FidelityWarning, StalledError, config_error
from flitsim.hardware import fabric_gpu, gpu_preset
from flitsim.hardware.fabric import FabricSpec
from flitsim.models import as_model
from flitsim.collectives import INJECTION_PACKET_OVERHEAD_BYTES, default_params
from flitsim.networks import FabricNetwork
from flitsim.parallel import map_ordered
from flitsim.report.metrics import fabric_metrics, schedule_metrics
from flitsim.report.scorecard import TOKEN_PIPELINES, map_verdict, match_results, pipelining_outcome, scorecard
from flitsim.scenario.cases import load_workload
from flitsim.scenario.spec import MapSection, MapWorkload, Scenario, map_fabric_spec
from flitsim.schedules.builder import DEFAULT_GPU

__all__ = ["Candidate", "CandidateRun", "MapResult", "candidates", "run_map", "evaluate", "decide_cell", "cell_columns",
           "map_json", "write_map"]


@dataclasses.dataclass(frozen=True)
class Candidate:
    """One schedule of a cell: builder ``name``, display ``label``, builder
    ``options`` and whether it is the cell's pipelined family (``pipelined``:
    token-level for prefill / DiT, micro-batch PP for decode)."""

    name: str
    label: str
    options: dict[str, Any]
    pipelined: bool


@dataclasses.dataclass
class CandidateRun:
    """What one candidate produced on one cell. ``status``: ``ok``, ``oom``
    (static or run peak above HBM; not a winner), ``infeasible`` (the
    builder or the run refused it; ``reason`` says why) or ``failed`` (its
    ``-j N`` worker process died, even rerun alone: ``reason`` says how, e.g.
    the out-of-memory killer; the map goes on without it). ``latency_s``: the
    makespan (s) of what the row compares; ``card``: its scorecard rows."""

    row: int
    col: int
    candidate: Candidate
    status: str
    reason: str = ""
    latency_s: float = float("nan")
    metrics: dict[str, Any] = dataclasses.field(default_factory=dict)
    card: Any = None
    fidelity: str = ""
    fidelity_reason: str = ""
    #: whether the executor's exact periodic skip applied ("periodic: skipped
    #: ..." / "not periodic: <why>"; rust/src/taskgraph/exec.rs)
    periodic: str = ""
    #: staged copies run as chunk trains (flow level's opt-in lever, ``[map] chunk_trains``; docs/fidelity.md "Chunk trains")
    chunk_trains: int = 0
    peak_memory_bytes: float = float("nan")
    hbm_capacity_bytes: float = float("nan")
    memory_broken_by: str | None = None
    throughput_tokens_per_s: float = float("nan")
    wall_s: float = 0.0
    cpu_s: float = 0.0
    #: False when a pipelined candidate ran no pipelined step (PipeFusion with steps <= warmup_steps: its
    #: warm-up passes the whole image stage after stage); None = as the candidate says
    pipelined_override: bool | None = None

    @property
    def pipelined(self) -> bool:
        """Whether this run counts as the cell's token-level pipeline (the candidate's family,
        unless it ran no pipelined step)."""
        return self.candidate.pipelined if self.pipelined_override is None else self.pipelined_override


def _divisors_upto(n: int) -> list[int]:
    return [d for d in range(1, n + 1) if n % d == 0]


def candidates(kind: str, model: Any, n: int, *, restrict: list[str] | None = None,
               requests: int | None = None, cfg_workload: bool = False) -> list[Candidate]:
    """Every schedule that applies to a workload of ``kind`` (``prefill``,
    ``decode``, ``dit``) on ``n`` GPUs. Which options each gets: pipelines
    use ``n`` stages (TeraPipe ``n`` uniform slices, and the DP on a grid of
    1/64 of the prompt rounded to 64 tokens; PipeFusion ``n`` patches), the
    rest degree ``n``; decode splits ``n`` into every PP x TP with TP dividing
    the KV heads. Hybrids (``n`` even, >= 4): TeraPipe DP x TP2 and USP
    (Ulysses n/2 x Ring 2) for prefill; PipeFusion x Ulysses2, USP and, for a
    workload with classifier-free guidance (``cfg_workload``), PipeFusion x CFG2
    and CFG2 x Ulysses n/2 for DiTs. Whether a candidate can really be built
    is the builder's call (:func:`run_map` records a refusal as infeasible)."""
    out: list[Candidate] = []
    h = n // 2 if n % 2 == 0 and n >= 4 else 0  # the half for 2-way hybrids
    if kind == "prefill":
        out = [Candidate("terapipe", "TeraPipe uniform", {"stages": n, "slices": n}, True),
               Candidate("terapipe", "TeraPipe DP", {"stages": n, "slicing": "dp"}, True),
               Candidate("layer_pipeline", "layer pipeline", {"stages": n, "batch": 1, "micro_batches": 1}, False),
               Candidate("tensor_parallel", "tensor parallel", {"degree": n}, False),
               Candidate("ulysses", "Ulysses", {"degree": n}, False),
               Candidate("ring_attention", "Ring", {"degree": n}, False)]
        if h:
            out += [Candidate("terapipe", "TeraPipe DP x TP2", {"stages": h, "tp": 2, "slicing": "dp"}, True),
                    Candidate("usp", f"USP (Ulysses {h} x Ring 2)", {"ulysses": h, "ring": 2}, False)]
    elif kind == "decode":
        cfg = as_model(model)
        kv = int(getattr(cfg, "n_kv_heads", 0) or cfg.n_heads)
        for tp in _divisors_upto(n):
            if kv % tp:
                continue
            pp = n // tp
            out.append(Candidate("decode", f"decode PP{pp} x TP{tp}",
                                 {"stages": pp, "tp": tp, **({"requests": requests} if requests else {})}, pp >= 2))
    elif kind == "dit":
        out = [Candidate("pipefusion", "PipeFusion", {"stages": n, "patches": n}, True),
               Candidate("tensor_parallel", "tensor parallel", {"degree": n}, False),
               Candidate("ulysses", "Ulysses", {"degree": n}, False),
               Candidate("ring_attention", "Ring", {"degree": n}, False),
               Candidate("distrifusion", "DistriFusion", {"degree": n}, False)]
        if h:  # xDiT's hybrids (CFG ones only where the workload has classifier-free guidance)
            out += [Candidate("pipefusion", "PipeFusion x Ulysses2", {"stages": h, "patches": h, "ulysses": 2}, True),
                    Candidate("usp", f"USP (Ulysses {h} x Ring 2)", {"ulysses": h, "ring": 2}, False)]
            if cfg_workload:
                out += [Candidate("pipefusion", "PipeFusion x CFG2", {"stages": h, "patches": h, "cfg": 2}, True),
                        Candidate("cfg_parallel", f"CFG2 x Ulysses {h}", {"cfg": 2, "ulysses": h}, False)]
    if restrict is not None:
        out = [c for c in out if c.name in restrict]
    return out


@dataclasses.dataclass(frozen=True)
class _Column:
    """A map column ready to run (picklable: sent to worker processes)."""

    index: int
    label: str
    preset: str
    fabric: FabricSpec
    network: FabricNetwork
    devices: int
    gpu: str
    breakeven_flop_per_byte: float
    fidelity: str


@dataclasses.dataclass(frozen=True)
class _Row:
    index: int
    name: str
    kind: str  # prefill | decode | dit
    model: str | None
    info: dict[str, Any]
    workload: Any
    compares: str


def gpu_payload_GBps(fab: FabricSpec) -> float:
    """Per-GPU payload rate the break-even FLOP/byte is taken against, GB/s:
    the fabric's ``gpu.injection_bytes_per_s`` when set, else the calibrated
    ``link_efficiency`` x the payload rates of GPU 0's own wires (its NVLink
    ports, or its one PCIe link on a PCIe fabric), each protocol packet
    charged its payload + ``INJECTION_PACKET_OVERHEAD_BYTES`` (the same rule
    as :meth:`flitsim.networks.AnalyticNetwork.from_fabric`, which assumes
    every GPU port carries ``links[0]``)."""
    if fab.gpu.injection_bytes_per_s:
        return float(fab.gpu.injection_bytes_per_s) / 1e9
    payload = int(fab.gpu.payload_bytes)
    raw = sum(fab.links[w.link].payload_GBps() for w in fab.wires if w.gpu == 0)
    return raw * float(default_params()["link_efficiency"]) * payload / (payload + INJECTION_PACKET_OVERHEAD_BYTES)


def _columns(m: MapSection) -> list[_Column]:
    cols = []
    for i, c in enumerate(m.fabrics):
        fab = map_fabric_spec(c, i)
        n = c.devices or m.devices
        if n > fab.gpus:
            raise config_error(f"map.fabrics.{i}.devices", n, f"at most the {fab.gpus} GPUs of {c.preset}")
        gpu = c.gpu or fabric_gpu(fab) or DEFAULT_GPU
        try:
            g = gpu_preset(gpu)
        except ConfigError as e:
            raise config_error(f"map.fabrics.{i}.gpu", gpu, str(e)) from None
        be = g.peak_flop_per_s("bf16") / (gpu_payload_GBps(fab) * 1e9)
        net = FabricNetwork(fab, collective_params={"chunk_trains": True}) if m.chunk_trains else FabricNetwork(fab)
        cols.append(_Column(i, c.label or c.preset, c.preset, fab, net, n, g.name, be,
                            str(getattr(fab, "fidelity", "packet"))))
    return cols


def _rows(m: MapSection, sc: Scenario) -> list[_Row]:
    rows = []
    for i, w in enumerate(m.workloads):
        try:
            if w.model is not None:
                as_model(w.model)
            if w.workload.model is not None:
                as_model(w.workload.model)
        except ConfigError as e:
            raise config_error(f"map.workloads.{i}.model", w.model or w.workload.model, str(e)) from None
        try:
            wl, info = load_workload(w, sc)
        except ConfigError as e:  # the workload's own fields (resolution, steps, ...): named inside
            raise ConfigError(f"map.workloads.{i}.workload: {e}") from None
        decode = w.phase == "decode"
        if decode and (info["kind"] != "llm" or w.workload.kind not in ("llmperf", "trace")):
            raise config_error(f"map.workloads.{i}.phase", w.phase, "decode only for an LLM llmperf / trace workload")
        if info["kind"] == "dit":
            kind, compares = "dit", "latency of one image (s)"
        elif decode:
            kind = "decode"
            n_req = int(w.workload.llmperf.get("n_requests", 0)) or len(info["workload"].requests)
            compares = f"makespan of a batch of {n_req} requests (s): a batch-throughput comparison"
        else:
            kind, compares = "prefill", "latency of one request's prefill (TTFT without queueing, s)"
        if w.schedules is not None:  # a typo or a builder of another kind would leave the row silently empty
            names = sorted({c.name for c in candidates(kind, w.model, 8, cfg_workload=True)})
            if not w.schedules or any(x not in names for x in w.schedules):
                raise config_error(f"map.workloads.{i}.schedules", w.schedules,
                                   f"one or more of {names} (the builders of a {kind} row; omit the key for all)")
        rows.append(_Row(i, w.name, kind, w.model, info, wl, compares))
    return rows


def _requests(row: _Row) -> int | None:
    if row.kind != "decode":
        return None
    return len(row.info["workload"].requests)


def _grid_tokens(tokens: int) -> int:
    """TeraPipe DP grid: 1/64 of the prompt, rounded up to 64 tokens (a 64 x 64
    DP per prompt: bounded build time at 128k tokens)."""
    return max(64, -(-tokens // 64 // 64) * 64)


def build_candidate(row: _Row, col: _Column, cand: Candidate, tok: Any = None) -> Any:
    """The schedule of ``cand`` for the row's workload on the column's GPU and
    fabric size; ``tok``: the prompt length (prefill rows: one of the row's
    representative lengths), else None. Raises ConfigError as the builder."""
    o: dict[str, Any] = {**cand.options, "gpu": col.gpu, "fabric_devices": col.fabric.gpus}
    if cand.name == "terapipe" and o.get("slicing") == "dp":
        o["grid_tokens"] = _grid_tokens(int(tok))
    if row.kind == "dit":
        return S.build(cand.name, None, row.workload, **o)
    if row.kind == "decode":
        return S.build(cand.name, row.model, row.info["workload"], **o)
    return S.build(cand.name, row.model, int(tok), **o)


def _run_one(row: _Row, col: _Column, cand: Candidate) -> CandidateRun:
    """Build, memory-check and simulate one candidate on one cell."""
    t0, c0 = time.perf_counter(), time.process_time()
    run = CandidateRun(row.index, col.index, cand, "ok")
    reps: list[Any] = row.info["reps"] if row.kind == "prefill" else [None]
    per = []
    try:
        for tok in reps:
            built = build_candidate(row, col, cand, tok)
            fp = built.footprint()
            if fp.status == "oom":
                run.status, run.reason = "oom", f"{fp.peak_bytes / 1e9:.1f} GB > {fp.capacity_bytes / 1e9:.1f} GB HBM ({fp.broken_by})"
                run.peak_memory_bytes, run.hbm_capacity_bytes, run.memory_broken_by = fp.peak_bytes, fp.capacity_bytes, fp.broken_by
                run.wall_s, run.cpu_s = time.perf_counter() - t0, time.process_time() - c0
                return run
            with warnings.catch_warnings():
                # recorded per run instead (fidelity_reason, decisive_outside_flow_validation)
                warnings.simplefilter("ignore", FidelityWarning)
                per.append(S.simulate(built, col.network))
    except (ConfigError, StalledError) as e:
        run.status, run.reason = "infeasible", str(e).split("\n")[0]
        run.wall_s, run.cpu_s = time.perf_counter() - t0, time.process_time() - c0
        return run
    out = evaluate(run, per, workload=row.info, breakeven_flop_per_byte=col.breakeven_flop_per_byte,
                   decode=row.kind == "decode", t0=t0)
    out.cpu_s = time.process_time() - c0  # CPU of this process: wall_s is inflated on a shared machine
    return out


def evaluate(run: CandidateRun, per: list[Any], *, workload: dict[str, Any], breakeven_flop_per_byte: float | None,
             decode: bool = False, t0: float | None = None) -> CandidateRun:
    """Fill ``run`` from its simulated schedules ``per`` (one per
    representative length): memory with the run's buffers (``oom`` if above
    HBM), mean metrics (FLOP/byte = total FLOPs / total bytes), latency,
    fidelity, scorecard (:func:`~flitsim.report.scorecard.scorecard` against
    ``breakeven_flop_per_byte``) and, for ``decode``, output tokens/s.
    ``workload``: the scorecard's workload facts. Returns ``run``."""
    t0 = time.perf_counter() if t0 is None else t0
    cand = run.candidate
    fps = [s.footprint() for s in per if "memory_static" in s.options]
    if fps:
        worst = max(fps, key=lambda f: f.peak_bytes)
        run.peak_memory_bytes, run.hbm_capacity_bytes, run.memory_broken_by = worst.peak_bytes, worst.capacity_bytes, worst.broken_by
        if worst.status == "oom":
            run.status = "oom"
            run.reason = (f"{worst.peak_bytes / 1e9:.1f} GB > {worst.capacity_bytes / 1e9:.1f} GB HBM "
                          f"({worst.broken_by}, with the run's comm buffers)")
    if cand.pipelined and any(int(s.options.get("warmup_steps", -1)) >= int(s.steps) for s in per):
        # every step is a warm-up step (full image, stage after stage): nothing is token-level pipelined
        run.pipelined_override = False
        w = max(int(s.options["warmup_steps"]) for s in per)
        run.reason = (f"no pipelined step: {int(per[0].steps)} step(s) <= warmup_steps {w}, so it runs as a "
                      "layer pipeline of the whole image and competes as non-pipelined")
    ms = [schedule_metrics(s) for s in per]
    agg = {k: (float(np.mean([m[k] for m in ms])) if isinstance(v, (int, float)) else v) for k, v in ms[0].items()}
    fl, by = sum(m["flops"] for m in ms), sum(m["comm_bytes"] for m in ms)
    agg["flop_per_comm_byte"] = fl / by if by else float("inf")
    run.metrics = agg
    run.latency_s = agg["makespan_s"]
    rep = per[len(per) // 2]
    net = rep.run.network if isinstance(rep.run.network, dict) else {}
    fab = None
    if "links" in net and hasattr(net["links"], "columns"):
        f = fabric_metrics(net["links"], net["switch_ports"], rep.run.makespan_ps)
        fab = {k: v for k, v in f.items() if not hasattr(v, "columns")}
    run.card = scorecard(schedule=cand.label, devices=len(rep.devices), metrics=agg, single_gpu_s=None,
                         workload=workload, breakeven_flop_per_byte=breakeven_flop_per_byte, fabric=fab,
                         stages=rep.stages)
    nets = [s.run.network if isinstance(s.run.network, dict) else {} for s in per]
    run.fidelity = " + ".join(sorted({str(n.get("fidelity", "analytic")) for n in nets}))
    run.fidelity_reason = "; ".join(sorted({str(n.get("fidelity_reason", "")) for n in nets} - {""}))
    run.periodic = "; ".join(sorted({str(n.get("periodic", "")) for n in nets} - {""}))
    run.chunk_trains = sum(int(n.get("chunk_trains", 0)) for n in nets)
    if decode:
        out_tok = float(np.sum(rep.options.get("output_tokens", [])))
        run.throughput_tokens_per_s = out_tok / run.latency_s if run.latency_s else float("nan")
    run.wall_s = time.perf_counter() - t0
    return run


def _cost_hint(row: _Row, col: _Column | None = None, cand: Candidate | None = None) -> float:
    """Rough relative cost of a run, to submit the heavy runs first so -j N
    keeps every worker busy (the order changes no result): the row's tokens,
    x the column's GPUs (flows per collective grow with them), and x the GPUs
    again for DistriFusion (every layer of every step gathers to every GPU:
    N (N - 1) flows at flow level; on the 32-GPU InfiniBand column these
    are the map's longest runs, docs/map.md)."""
    if row.kind == "dit":
        t = float(row.workload.image_tokens)
    elif row.kind == "prefill":
        t = float(sum(row.info["reps"]))
    else:
        t = 1e4
    if col is not None:
        t *= col.devices
        if cand is not None and cand.name == "distrifusion":
            t *= col.devices
    return t


def cell_columns() -> list[str]:
    """Columns of :meth:`MapResult.table` (one row per cell), in order."""
    return ["workload", "fabric", "fabric_preset", "devices", "gpu", "kind", "compares", "status", "winner",
            "winner_s", "best_nonpipelined", "best_nonpipelined_s", "margin_over_nonpipelined", "best_pipelined",
            "best_pipelined_s", "pipelining", "pipelining_ratio", "verdict", "verdict_text", "task_match",
            "metric_match", "structure_match", "dependency_density", "flop_per_byte_vs_breakeven",
            "compute_to_comm", "stage_time_cv", "fill_drain_share", "credit_exhaustion_share", "feasible",
            "oom", "infeasible", "failed", "fidelity", "fidelity_reason", "decisive_outside_flow_validation",
            "throughput_tokens_per_s", "margin", "tie",
            "wall_s"]


def decide_cell(runs: list[CandidateRun], *, margin: float, tie: float) -> dict[str, Any]:
    """The cell's row of the map from its candidates' runs (see the module
    docstring): winner, best non-pipelined and margin, best pipelined and
    wins / ties / loses, the three PMF matches of the best pipeline and the
    verdict. Pure: the tests feed it hand-built runs."""
    ok = [r for r in runs if r.status == "ok"]
    ok.sort(key=lambda r: (r.latency_s, r.candidate.label))  # label: deterministic tie-break
    pipes = [r for r in ok if r.pipelined]
    nonp = [r for r in ok if not r.pipelined]
    win = ok[0] if ok else None
    bp = pipes[0] if pipes else None
    bn = nonp[0] if nonp else None
    oom_p = [r for r in runs if r.pipelined and r.status == "oom"]
    inf_p = [r for r in runs if r.pipelined and r.status == "infeasible"]
    inf_p += [r for r in ok if r.candidate.pipelined and not r.pipelined]  # ran, but no pipelined step
    failed = [r for r in runs if r.status == "failed"]
    fail_p = [r for r in failed if r.candidate.pipelined]
    matches = match_results(bp.card) if bp is not None else None
    verdict, text = map_verdict(
        matches=matches, pipe_s=bp.latency_s if bp else None, pipe_label=bp.candidate.label if bp else None,
        fastest_s=win.latency_s if win else None, fastest_label=win.candidate.label if win else None, margin=margin,
        pipe_oom="; ".join(f"{r.candidate.label}: {r.reason}" for r in oom_p) or None,
        pipe_infeasible="; ".join(f"{r.candidate.label}: {r.reason}" for r in inf_p) or None,
        pipe_failed="; ".join(f"{r.candidate.label}: {r.reason}" for r in fail_p) or None)
    if failed and verdict != "failed":
        # a run that did not finish might have won: the reader is told which
        text += ("; not decided for certain: " + ", ".join(r.candidate.label for r in failed)
                 + " did not finish (column failed)")
    outcome, ratio = pipelining_outcome(bp.latency_s if bp else None, bn.latency_s if bn else None, tie)
    figs: dict[str, float] = {}
    if bp is not None:
        c = bp.card
        for key in ("dependency_density", "flop_per_byte_vs_breakeven", "compute_to_comm", "stage_time_cv",
                    "fill_drain_share", "credit_exhaustion_share"):
            v = c.loc[c["key"] == key, "value"]
            figs[key] = float(v.iloc[0]) if len(v) else float("nan")
    fids = sorted({r.fidelity for r in ok if r.fidelity})
    reasons = sorted({r.fidelity_reason for r in ok if r.fidelity_reason})
    # the runs that decide the cell: winner, best pipeline, best non-pipelined
    decisive = {id(r): r for r in (win, bp, bn) if r is not None}.values()
    outside = sorted({r.candidate.label for r in decisive if r.fidelity_reason.startswith("warning")})
    return {
        "status": "ok" if win else ("failed" if failed else "no feasible schedule"),
        "winner": win.candidate.label if win else None, "winner_s": win.latency_s if win else float("nan"),
        "best_nonpipelined": bn.candidate.label if bn else None,
        "best_nonpipelined_s": bn.latency_s if bn else float("nan"),
        "margin_over_nonpipelined": (bn.latency_s / win.latency_s) if (bn and win) else float("nan"),
        "best_pipelined": bp.candidate.label if bp else None, "best_pipelined_s": bp.latency_s if bp else float("nan"),
        "pipelining": outcome, "pipelining_ratio": ratio, "verdict": verdict, "verdict_text": text,
        "task_match": matches["task"]["passes"] if matches else None,
        "metric_match": matches["metric"]["passes"] if matches else None,
        "structure_match": matches["structure"]["passes"] if matches else None,
        **{k: figs.get(k, float("nan")) for k in ("dependency_density", "flop_per_byte_vs_breakeven", "compute_to_comm",
                                                  "stage_time_cv", "fill_drain_share", "credit_exhaustion_share")},
        "feasible": len(ok),
        "oom": "; ".join(f"{r.candidate.label} ({r.reason})" for r in runs if r.status == "oom"),
        "infeasible": "; ".join(f"{r.candidate.label} ({r.reason})" for r in runs if r.status == "infeasible"),
        "failed": "; ".join(f"{r.candidate.label} ({r.reason})" for r in failed),
        "fidelity": " + ".join(fids), "fidelity_reason": " | ".join(reasons),
        "decisive_outside_flow_validation": "; ".join(outside),
        "throughput_tokens_per_s": win.throughput_tokens_per_s if win else float("nan"),
        "margin": margin, "tie": tie, "wall_s": float(sum(r.wall_s for r in runs)),
    }


@dataclasses.dataclass
class MapResult:
    """The map: :attr:`cells` (one dict per (row, column), :func:`cell_columns`),
    :attr:`runs` (every candidate run), the axes, and the published-measurement
    checks (:attr:`reference`, :func:`flitsim.scenario.published.reference_checks`)."""

    rows: list[str]
    columns: list[str]
    cells: list[dict[str, Any]]
    runs: list[CandidateRun]
    reference: Any = None
    wall_s: float = 0.0

    def table(self) -> pd.DataFrame:
        """One row per cell (the map as data), columns :func:`cell_columns`."""
        return pd.DataFrame(self.cells, columns=cell_columns())

    def candidates_table(self) -> pd.DataFrame:
        """One row per (cell, schedule): status, reason, latency, ratio to the
        cell's winner, fidelity, memory, pipelined."""
        win = {(c["workload"], c["fabric"]): c["winner_s"] for c in self.cells}
        out = []
        for r in self.runs:
            w, f = self.rows[r.row], self.columns[r.col]
            out.append({"workload": w, "fabric": f, "schedule": r.candidate.label, "builder": r.candidate.name,
                        "options": str(r.candidate.options), "pipelined": r.pipelined, "status": r.status,
                        "reason": r.reason, "latency_s": r.latency_s, "vs_winner": r.latency_s / win[(w, f)]
                        if win[(w, f)] == win[(w, f)] else float("nan"),
                        "fidelity": r.fidelity, "peak_memory_bytes": r.peak_memory_bytes,
                        "hbm_capacity_bytes": r.hbm_capacity_bytes, "memory_broken_by": r.memory_broken_by,
                        "throughput_tokens_per_s": r.throughput_tokens_per_s, "wall_s": r.wall_s,
                        "cpu_s": r.cpu_s, "periodic": r.periodic, "chunk_trains": r.chunk_trains})
        return pd.DataFrame(out)

    def scorecards(self) -> pd.DataFrame:
        """Every candidate's scorecard (numeric value, unit, threshold) with
        its workload and fabric."""
        cards = [r.card.assign(workload=self.rows[r.row], fabric=self.columns[r.col])
                 for r in self.runs if r.card is not None]
        return pd.concat(cards, ignore_index=True) if cards else pd.DataFrame()

    def pivot(self, field: str = "verdict") -> pd.DataFrame:
        """The map as a workloads x fabrics frame of one cell field."""
        t = self.table()
        return t.pivot(index="workload", columns="fabric", values=field).reindex(index=self.rows, columns=self.columns)


def run_map(sc: Scenario, *, jobs: int = 1, progress: bool = True) -> MapResult:
    """Simulate every feasible schedule of every cell of ``sc.map``.

    Raises:
        ConfigError: no ``[map]``; an unknown fabric preset, GPU or model
            (naming ``map.fabrics.<i>.preset`` / ``.gpu`` / ``map.workloads.<i>.model``);
            more devices than a fabric has. A cell with no feasible schedule
            is a cell verdict, not an error.
    """
    from flitsim.scenario.published import reference_checks

    t0 = time.perf_counter()
    if sc.map is None:
        raise config_error("map", None, "a [map] section")
    m = sc.map
    cols = _columns(m)
    rows = _rows(m, sc)
    plan: list[tuple[_Row, _Column, Candidate]] = []
    for row in rows:
        w: MapWorkload = m.workloads[row.index]
        for col in cols:
            model = row.model if row.kind != "dit" else row.workload.model
            cfgw = row.kind == "dit" and bool(getattr(row.workload, "uses_cfg", False))
            for cand in candidates(row.kind, model, col.devices, restrict=w.schedules,
                                   requests=_requests(row), cfg_workload=cfgw):
                plan.append((row, col, cand))
    order = sorted(range(len(plan)), key=lambda i: (-_cost_hint(*plan[i]), i))
    bar = None
    if progress:
        from flitsim._progress import progress_bar  # tqdm on a terminal, periodic plain lines in a log

        bar = progress_bar(len(plan), desc="map", unit="run", file=sys.stderr)

    def done(i: int, r: CandidateRun) -> None:
        if bar:
            bar.update(1)

    def crashed(k: int, why: str) -> CandidateRun:
        row, col, cand = plan[order[k]]
        return CandidateRun(row.index, col.index, cand, "failed", reason=f"run did not finish: {why}")

    res = map_ordered(_run_one, [plan[i] for i in order], jobs, done, crashed)
    if bar:
        bar.close()
    runs: list[CandidateRun] = [None] * len(plan)  # type: ignore[list-item]
    for k, i in enumerate(order):
        runs[i] = res[k]
    cells = []
    for row in rows:
        for col in cols:
            rs = [r for r in runs if r.row == row.index and r.col == col.index]
            cells.append({"workload": row.name, "fabric": col.label, "fabric_preset": col.preset, "devices": col.devices,
                          "gpu": col.gpu, "kind": row.kind, "compares": row.compares,
                          **decide_cell(rs, margin=m.margin, tie=m.tie)})
    out = MapResult([r.name for r in rows], [c.label for c in cols], cells, runs)
    out.reference = reference_checks(out, rows=[(r.name, r.kind, r.workload) for r in rows],
                                     columns=[(c.label, c.preset) for c in cols])
    out.wall_s = time.perf_counter() - t0
    return out



def map_json(res: MapResult) -> dict[str, Any]:
    """JSON-safe dict of the map: axes, cells, every candidate run, the
    published-measurement checks (NaN -> None)."""
    import json

    def frame(df: pd.DataFrame) -> list[dict[str, Any]]:
        return json.loads(df.to_json(orient="records"))  # NaN -> null

    ref = res.reference if res.reference is not None else pd.DataFrame()
    return {"rows": res.rows, "columns": res.columns, "wall_s": res.wall_s, "cells": frame(res.table()),
            "candidates": frame(res.candidates_table()), "reference": frame(ref)}


def write_map(res: MapResult, out: Any, *, figures: bool = True, title: str = "PMF map") -> dict[str, str]:
    """Write the map into folder ``out``: ``map.parquet`` / ``map.csv`` (one
    row per cell), ``map.json`` (:func:`map_json`), ``map_candidates.parquet``
    (every schedule of every cell), ``map_scorecards.parquet``,
    ``map_reference.parquet`` (published checks) and, with ``figures``,
    ``figures/map.png`` + ``figures/map.svg`` (:func:`flitsim.report.map_plot.map_heatmap`).
    Returns {artifact: path}."""
    import json
    from pathlib import Path

    o = Path(out)
    t = res.table()
    t.to_parquet(o / "map.parquet", index=False)
    t.to_csv(o / "map.csv", index=False)
    res.candidates_table().to_parquet(o / "map_candidates.parquet", index=False)
    cards = res.scorecards()
    if len(cards):
        cards.to_parquet(o / "map_scorecards.parquet", index=False)
    ref = res.reference if res.reference is not None else pd.DataFrame()
    ref.astype({"agrees": "object"}).to_parquet(o / "map_reference.parquet", index=False) if len(ref) else None
    with open(o / "map.json", "w") as f:
        json.dump(map_json(res), f, indent=1)
    paths = {"map": str(o / "map.parquet"), "map_json": str(o / "map.json"),
             "map_candidates": str(o / "map_candidates.parquet")}
    if figures:
        from flitsim.report.map_plot import map_heatmap

        (o / "figures").mkdir(exist_ok=True)
        fig = map_heatmap(t, res.rows, res.columns, title=title)
        fig.savefig(o / "figures" / "map.png")
        import matplotlib

        with matplotlib.rc_context({"svg.hashsalt": "flitsim-map"}):  # same bytes on every run: fixed ids, no date
            fig.savefig(o / "figures" / "map.svg", metadata={"Date": None})
        import matplotlib.pyplot as plt

        plt.close(fig)
        paths.update(map_png=str(o / "figures" / "map.png"), map_svg=str(o / "figures" / "map.svg"))
    return paths
