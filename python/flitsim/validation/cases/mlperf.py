"""MLPerf Inference, closed division, Offline, Llama 2 70B, tokens/s
(MLCommons inference_results_v5.0 / v5.1, closed/NVIDIA; TensorRT-LLM, FP8 on
Hopper, FP4 on Blackwell). Served by ``flitsim.serving`` (issue 18):
:func:`flitsim.serving.mlperf.mlperf_offline` simulates each
tensor-parallel x replica layout; the case takes the best layout, as a
submitter does. Nothing is fitted on these rows (transfer).

Until ``flitsim.serving.mlperf`` exists (and has the row) a case reports
``skipped``, never a pass."""

from __future__ import annotations

import importlib.util
from typing import Any, Callable

from flitsim.validation.case import Case

TOL = 0.15
WHY = ("the input-length distribution of MLPerf's processed OpenOrca set is not in our sources (assumed), nor "
       "TensorRT-LLM's engine settings; 15 %")


def _requires(row: str) -> Callable[[], str | None]:
    def check() -> str | None:
        if importlib.util.find_spec("flitsim.serving") is None:
            return "serving missing: flitsim.serving (issue 18)"
        if importlib.util.find_spec("flitsim.serving.mlperf") is None:
            return "serving missing: flitsim.serving.mlperf (issue 18)"
        mlperf = importlib.import_module("flitsim.serving.mlperf")  # optional until issue 18 lands
        if row not in getattr(mlperf, "MLPERF_OFFLINE_ROWS", {}):
            return f"row {row!r} not in flitsim.serving.mlperf.MLPERF_OFFLINE_ROWS"
        return None
    return check


def _offline(row: str) -> Callable[[Any], Any]:
    def compute(ctx: Any) -> Any:
        df = importlib.import_module("flitsim.serving.mlperf").mlperf_offline(row)
        ok = df[df.get("sim_tokens_per_s").notna()] if "sim_tokens_per_s" in df else df.iloc[0:0]
        if ok.empty:
            raise RuntimeError(f"no layout of {row} fits: {df.get('error', df).tolist()}")
        best = ok.loc[ok.sim_tokens_per_s.idxmax()]
        return float(best.sim_tokens_per_s), f"best layout {best.layout}"
    return compute


def _case(row: str, system: str, measured: float, source: str) -> Case:
    return Case(id=f"mlperf.offline_{row.replace('-', '_')}", area="mlperf",
                quantity=f"MLPerf Offline Llama 2 70B, {system}, best layout", unit="tokens/s", source=source,
                measured=measured, tolerance=TOL, tolerance_why=WHY,
                call=f'flitsim.serving.mlperf.mlperf_offline("{row}").sim_tokens_per_s.max()', compute=_offline(row),
                tag="transfer", system=system.split(" x")[0].replace("DGX ", ""), size_band="8 GPUs",
                requires=_requires(row))


CASES = [
    _case("dgx-h100x8", "DGX H100 x8", 31306.8, "MLCommons inference_results_v5.0, closed/NVIDIA, Llama 2 70B Offline"),
    _case("h200x8", "H200 x8", 34988.2, "MLCommons inference_results_v5.0, closed/NVIDIA, Llama 2 70B Offline"),
    _case("dgx-b200x8", "DGX B200 x8", 101527.0, "MLCommons inference_results_v5.1, closed/NVIDIA, Llama 2 70B Offline"),
]
