"""Kernel-level compute model: kernel shapes -> time on a GPU; measured
profiles override.

==================  ==========================================================
``gemm``            tile / wave quantization, per-shape efficiency curve, memory floor
``attention``       FlashAttention-2-style forward: head-size, block and wave quantization; per score a
                    tensor phase (mma.sync ceiling) and a softmax phase (SFU / FP32 pipes)
``elementwise``     tensor bytes at memory bandwidth; compiler fusion
``launch``          execution modes (eager, CUDA graph, compiled): launch and dispatch costs
``profile``         measured kernel profiles (CSV / Parquet), validation and lookup
``overlap``         communication kernels' SM share (communication steals compute)
``model``           :class:`CostModel`: a task's kernels -> seconds (cached)
==================  ==========================================================

Shapes come from :mod:`flitsim.models.kernels`; GPUs from
:mod:`flitsim.hardware.gpus`. docs/compute.md has the equations, defaults,
sources and the calibration.
"""

from flitsim.cost.attention import AttentionParams, attention_time_s, padded_head_dim
from flitsim.cost.elementwise import elementwise_time_s, fuse_elementwise
from flitsim.cost.gemm import GemmParams, gemm_time_s
from flitsim.cost.launch import EXECUTION_MODES, ExecutionMode, execution_mode
from flitsim.cost.model import CostModel, row_times_s
from flitsim.cost.overlap import CommInterference
from flitsim.cost.profile import PROFILE_KEYS, Profile, read_profile

__all__ = ["AttentionParams", "attention_time_s", "padded_head_dim", "elementwise_time_s", "fuse_elementwise",
           "GemmParams", "gemm_time_s", "EXECUTION_MODES", "ExecutionMode", "execution_mode", "CostModel",
           "row_times_s", "CommInterference", "PROFILE_KEYS", "Profile", "read_profile"]
