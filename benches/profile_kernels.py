"""Record a measured kernel profile with PyTorch on a CUDA GPU, in the format
``flitsim profile`` reads (flitsim.cost.profile): the GEMM, attention and
elementwise kernels of the shipped schedules' shapes.

    python benches/profile_kernels.py --out my_h100.csv            # needs torch + CUDA
    python benches/profile_kernels.py --dry-run                    # list the shapes only
    flitsim profile show my_h100.csv                               # measured vs model

Shapes: every distinct kernel of one denoising step of PixArt-alpha and
Flux.1-dev at 1024 and 2048 px (1 GPU and the 8-way sequence / head shards the
parallel schedules run) and of Llama-3-70B prefill slices (512 and 2048 tokens,
one layer, 1 and 8-way tensor-parallel), lowered by flitsim.models.kernels.
Each kernel runs ``--warmup`` times, then ``--iters`` times between CUDA
events; the mean goes to ``time_us``. GEMMs are ``torch.matmul`` in the dtype,
attention is ``F.scaled_dot_product_attention`` (FlashAttention where PyTorch
picks it; causal rows with a context use an explicit mask shape), elementwise
kernels are the eager PyTorch ops the lowering names. A few minutes on an H100.
"""

from __future__ import annotations

import argparse
import sys
from typing import Any

import numpy as np
import pandas as pd

from flitsim.models.kernels import KINDS, OPS, Kernels, slice_kernels, step_kernels


def shapes() -> pd.DataFrame:
    """Distinct kernel rows (profile columns, no time) of the shipped schedules' shapes."""
    tabs: list[Kernels] = []
    for model, px_tokens in (("pixart-alpha", (4096, 16384)), ("flux.1-dev", (4096, 16384))):
        batch = 2 if model == "pixart-alpha" else 1
        for P in px_tokens:
            k = step_kernels(model, P, batch=batch, layers=[0, "patch_embed", "cond_embed", "final"])
            tabs += [k, k.shard_tokens(8), k.parts("attn").attention_as(heads_div=8), k.shard_heads(8)]
    for s in (512, 2048):
        k = slice_kernels("llama-3-70b", s, 0, layers=[0], logits_tokens=0)
        tabs += [k, k.shard_heads(8)]
    rows = []
    for k in tabs:
        c = k.cols
        for i in range(len(k)):
            kind = KINDS[int(c["kind"][i])]
            r: dict[str, Any] = {"kernel": kind}
            if kind == "gemm":
                r.update(m=int(c["m"][i]), n=int(c["n"][i]), k=int(c["k"][i]))
            elif kind == "attention":
                r.update({f: int(c[f][i]) for f in ("batch", "heads", "kv_heads", "q", "kv", "head_dim", "causal")})
            else:
                r.update(op=OPS[int(c["op"][i])], numel=int(c["numel"][i]), reads=int(c["reads"][i]))
            rows.append(r)
    df = pd.DataFrame(rows)
    key = [c for c in ("kernel", "m", "n", "k", "batch", "heads", "kv_heads", "q", "kv", "head_dim", "causal",
                       "op", "numel") if c in df.columns]
    return df.drop_duplicates(subset=key).reset_index(drop=True)


def _time_us(fn: Any, warmup: int, iters: int) -> float:
    import torch

    for _ in range(warmup):
        fn()
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    torch.cuda.synchronize()
    start.record()
    for _ in range(iters):
        fn()
    end.record()
    torch.cuda.synchronize()
    return start.elapsed_time(end) * 1e3 / iters


def _kernel_fn(r: Any, dtype: Any) -> Any:
    import torch
    import torch.nn.functional as F

    dev = "cuda"
    if r.kernel == "gemm":
        a = torch.randn(int(r.m), int(r.k), device=dev, dtype=dtype)
        b = torch.randn(int(r.k), int(r.n), device=dev, dtype=dtype)
        return lambda: torch.matmul(a, b)
    if r.kernel == "attention":
        B, H, KH, q, kv, hd = (int(r.batch), int(r.heads), int(r.kv_heads), int(r.q), int(r.kv), int(r.head_dim))
        Q = torch.randn(B, H, q, hd, device=dev, dtype=dtype)
        K = torch.randn(B, KH, kv, hd, device=dev, dtype=dtype).repeat_interleave(H // KH, dim=1)
        V = torch.randn_like(K)
        if int(r.causal) and kv == q:
            return lambda: F.scaled_dot_product_attention(Q, K, V, is_causal=True)
        if int(r.causal):
            mask = torch.ones(q, kv, device=dev, dtype=torch.bool).tril(diagonal=kv - q)
            return lambda: F.scaled_dot_product_attention(Q, K, V, attn_mask=mask)
        return lambda: F.scaled_dot_product_attention(Q, K, V)
    n = int(r.numel)
    x = torch.randn(n, device=dev, dtype=dtype)
    y = torch.randn(n, device=dev, dtype=dtype)
    op = r.op
    if op in ("layernorm", "rmsnorm", "qk_norm"):
        w = 128 if n % 128 == 0 else 1
        x2 = x.view(-1, w)
        if op == "layernorm":
            return lambda: F.layer_norm(x2, (w,))
        return lambda: x2 * torch.rsqrt(x2.float().pow(2).mean(-1, keepdim=True) + 1e-6).to(dtype)
    if op == "gelu":
        return lambda: F.gelu(x, approximate="tanh")
    if op == "silu":
        return lambda: F.silu(x)
    if op == "silu_mul":
        return lambda: F.silu(x) * y
    if op in ("residual_add", "pos_add"):
        return lambda: x + y
    if op in ("scale", "gate_mul", "rope"):
        return lambda: x * y
    # diffusers' eager fp32 chains (flitsim.models.kernels._rmsnorm_eager / _rope_eager)
    xf, yf = x.float(), y.float()
    if op == "cast_up":
        return lambda: x.float()
    if op == "cast_down":
        return lambda: xf.to(dtype)
    if op == "pow_f32":
        return lambda: xf.pow(2)
    if op == "mean_f32":
        w = 128 if n % 128 == 0 else 1
        return lambda: xf.view(-1, w).mean(-1, keepdim=True)
    if op == "add_eps":
        return lambda: xf + 1e-6
    if op == "rsqrt_f32":
        return lambda: torch.rsqrt(xf)
    if op == "mul_mixed":
        return lambda: x * yf
    if op == "mul_weight":
        return lambda: x * y
    if op == "mul_f32":
        return lambda: xf * yf
    if op == "add_f32":
        return lambda: xf + yf
    if op == "neg":  # -x_imag: a stride-2 view of a tensor twice the size
        x2 = torch.randn(2 * n, device=dev, dtype=dtype)
        return lambda: -x2[1::2]
    if op == "stack":
        a2 = torch.randn(2 * n, device=dev, dtype=dtype)
        return lambda: torch.stack([x, a2[0::2]], dim=-1)
    if op == "shift":
        return lambda: x + y
    return lambda: x.clone()  # concat, embedding: one read, one write


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description="Record a kernel profile for flitsim (PyTorch, CUDA).")
    ap.add_argument("--out", default="kernel_profile.csv", help="CSV (or .parquet) to write")
    ap.add_argument("--gpu", default=None, help="flitsim GPU preset name (default: from the device name)")
    ap.add_argument("--dtype", default="bf16", choices=["bf16", "fp16"])
    ap.add_argument("--warmup", type=int, default=5)
    ap.add_argument("--iters", type=int, default=20)
    ap.add_argument("--dry-run", action="store_true", help="print the shapes and exit (no torch needed)")
    a = ap.parse_args(argv)
    df = shapes()
    if a.dry_run:
        print(df.to_string())
        print(f"{len(df)} kernels")
        return 0
    import torch

    if not torch.cuda.is_available():
        print("no CUDA device: use --dry-run to list the shapes", file=sys.stderr)
        return 2
    name = torch.cuda.get_device_name()
    gpu = a.gpu
    if gpu is None:
        low = name.lower()
        for key in ("gb200", "b200", "h200", "h20", "h100", "a800", "a100", "l40s", "l40", "l20", "4090"):
            if key in low:
                gpu = {"4090": "rtx4090"}.get(key, key)
                if key in ("h100", "a100") and "pcie" in low:
                    gpu += "-pcie"
                break
        else:
            print(f"cannot map {name!r} to a flitsim GPU preset: pass --gpu", file=sys.stderr)
            return 2
    dtype = {"bf16": torch.bfloat16, "fp16": torch.float16}[a.dtype]
    times = []
    for r in df.itertuples():
        try:
            times.append(_time_us(_kernel_fn(r, dtype), a.warmup, a.iters))
        except torch.cuda.OutOfMemoryError:
            times.append(np.nan)
            torch.cuda.empty_cache()
    df["time_us"] = times
    df = df[df["time_us"].notna()].drop(columns=[c for c in ("reads",) if c in df.columns])
    df["gpu"], df["dtype"] = gpu, a.dtype
    df["source"] = f"measured: benches/profile_kernels.py, torch {torch.__version__}, {name}, mean of {a.iters}"
    (df.to_parquet if a.out.endswith(".parquet") else df.to_csv)(a.out, index=False)
    print(f"wrote {len(df)} kernels to {a.out} ({name} as {gpu})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
