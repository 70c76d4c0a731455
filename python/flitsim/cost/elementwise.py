"""Elementwise kernels (norms, modulation, activations, RoPE, residual adds,
copies) at memory bandwidth, and their fusion under a compiler.

An elementwise kernel reads ``reads`` and writes ``writes`` tensors of
``numel`` elements: ``bytes = numel x (reads + writes) x elem_bytes`` (tensor
bytes read + written). In an eager chain each kernel reads what the kernel
before it just wrote, and PyTorch's caching allocator hands a freed block of
the same size straight back, so a kernel whose tensors fit in L2 finds its
inputs there and writes over lines already resident: the share

    h = min(1, L2_RESIDENT_SHARE x l2_bytes / (l2_partitions x bytes))

of its bytes moves at the L2 bandwidth (``GpuSpec.l2_bytes_per_s``), the rest
at ``memory_efficiency x`` the device bandwidth:

    t = bytes x (h / l2_bytes_per_s + (1 - h) / (hbm_bytes_per_s x memory_efficiency))

``L2_RESIDENT_SHARE`` = 0.5 (**assumed**: the other half holds the weights and
the operands of the surrounding GEMMs); ``l2_partitions`` = 2 on A100 / Hopper /
Blackwell, whose two L2 partitions each hold what their half of the SMs touches
(an elementwise kernel's tensor is touched by both: held twice), 1 on Ada.
This matters most on Ada (96 MB in one L2 against 864 GB/s GDDR6), where a
1024 px activation (19-27 MB) fits and the eager chains run out of L2. A
compiler (torch.compile / Inductor) fuses a run of consecutive elementwise
kernels of one block part into one kernel: the intermediates stay in
registers, so the fused kernel reads ``sum(reads) - (count - 1)`` tensors (each
kernel but the first consumes its predecessor's output) and writes one.
"""

from __future__ import annotations

import numpy as np

from flitsim.hardware.gpus import GpuSpec

__all__ = ["elementwise_time_s", "fuse_elementwise", "l2_hit_share", "L2_RESIDENT_SHARE"]

L2_RESIDENT_SHARE = 0.5


def l2_hit_share(nbytes: np.ndarray, gpu: GpuSpec) -> np.ndarray:
    """Share of an elementwise kernel's ``nbytes`` (read + written) served from
    L2: ``min(1, L2_RESIDENT_SHARE x l2_bytes / (l2_partitions x nbytes))`` (1 for 0 bytes)."""
    b = np.asarray(nbytes, dtype=np.float64)
    return np.minimum(1.0, L2_RESIDENT_SHARE * gpu.l2_bytes / (gpu.l2_partitions * np.maximum(b, 1.0)))


def elementwise_time_s(numel: np.ndarray, reads: np.ndarray, writes: np.ndarray, elem_bytes: np.ndarray,
                       gpu: GpuSpec) -> np.ndarray:
    """Time of elementwise kernels, seconds: tensor bytes read + written, the
    L2-resident share at the L2 bandwidth and the rest at the streaming device
    bandwidth (module docstring; broadcast over the arguments)."""
    nbytes = np.asarray(numel, dtype=np.float64) * (np.asarray(reads) + np.asarray(writes)) * np.asarray(elem_bytes)
    h = l2_hit_share(nbytes, gpu)
    return nbytes * (h / gpu.l2_bytes_per_s + (1.0 - h) / (gpu.hbm_bytes_per_s * gpu.memory_efficiency))


def fuse_elementwise(cols: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    """Columns of a kernel table (see :class:`flitsim.models.Kernels`) with
    every run of consecutive elementwise rows of the same part merged into one
    row (numel the largest of the run, reads ``sum - (count - 1)``, writes 1)."""
    kind, part = cols["kind"], cols["part"]
    n = len(kind)
    if n == 0:
        return cols
    ew = kind == 2
    prev_ew = np.r_[False, ew[:-1]]
    same_part = np.r_[False, part[1:] == part[:-1]]
    joins = ew & prev_ew & same_part          # row continues the previous row's group
    group = np.cumsum(~joins) - 1
    g = int(group[-1]) + 1
    first = np.nonzero(~joins)[0]
    out = {c: v[first].copy() for c, v in cols.items()}
    counts = np.bincount(group, minlength=g)
    numel = np.zeros(g, np.int64)
    np.maximum.at(numel, group, cols["numel"])
    reads = np.bincount(group, weights=cols["reads"], minlength=g).astype(np.int64) - (counts - 1)
    is_ew = out["kind"] == 2
    out["numel"] = np.where(is_ew, numel, out["numel"])
    out["reads"] = np.where(is_ew, reads, out["reads"])
    out["writes"] = np.where(is_ew & (counts > 1), 1, out["writes"])
    return out
