"""Arrival-driven LLM serving on a fabric: continuous batching, chunked
prefill, disaggregated prefill/decode (docs/serving.md).

=====================  ======================================================
``arrivals``           requests with an arrival process (offline, Poisson, gamma, trace)
``kv_cache``           paged K/V blocks, capacity from the memory model
``scheduler``          batching policies: static, continuous, chunked (preemption: recompute)
``iteration_cost``     one iteration's time: kernel model + TP collectives on the network
``engine``             the event loop of one instance
``disagg``             prefill and decode instances, K/V moved over the fabric
``metrics``            TTFT, TPOT, ITL, E2E... by LLMPerf, vLLM, GenAI-Perf, MLPerf definitions
``serve``              :func:`serve`: layout + policy + workload -> :class:`ServeResult`; rate sweeps
=====================  ======================================================
"""

from flitsim.serving.arrivals import ARRIVALS, RequestTable, request_table
from flitsim.serving.engine import GapHistogram, InstanceRun, run_instance
from flitsim.serving.iteration_cost import AffineIterationCost, CommModel, ModelIterationCost
from flitsim.serving.kv_cache import BlockManager, KvCapacity, kv_bytes_per_token, kv_capacity
from flitsim.serving.scheduler import POLICIES

__all__ = ["ARRIVALS", "RequestTable", "request_table", "GapHistogram", "InstanceRun", "run_instance",
           "AffineIterationCost", "CommModel", "ModelIterationCost", "BlockManager", "KvCapacity",
           "kv_bytes_per_token", "kv_capacity", "POLICIES"]

from flitsim.serving.disagg import KvTransfer, kv_transfer_bytes  # noqa: E402
from flitsim.serving.serve import Layout, ServeResult, parse_rates, plot_sweep, serve, sweep_rates  # noqa: E402

__all__ += ["KvTransfer", "kv_transfer_bytes", "Layout", "ServeResult", "parse_rates", "plot_sweep", "serve",
            "sweep_rates"]
