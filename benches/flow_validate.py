"""Flow level against packet level on every preset: the error table of
docs/fidelity.md (markdown). Each row: the same case at both fidelities, the
flow / packet time ratio, and what fidelity="auto" chose and why.

Usage: python benches/flow_validate.py [--size 64MiB]
"""

from __future__ import annotations

import argparse
import time
import warnings

import numpy as np

import flitsim
from flitsim.cli._common import parse_bytes
from flitsim.hardware import fabric_preset

PRESETS = ["gb200-nvl72", "hgx-b200", "hgx-h100", "dgx-a100"]


def pairwise(n: int) -> tuple[np.ndarray, np.ndarray]:
    s = np.tile(np.arange(n), n - 1)
    return s, (s + np.repeat(np.arange(1, n), n)) % n


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--size", default="64MiB", help="collective size (nccl-tests bytes)")
    a = ap.parse_args()
    size = parse_bytes(a.size)
    warnings.simplefilter("ignore")
    print("| preset | case | packet us | flow us | flow/packet - 1 | packet s | flow s | auto |")
    print("|---|---|---:|---:|---:|---:|---:|---|")
    for name in PRESETS:
        n = fabric_preset(name).gpus
        cases = [("p2p 4 MiB", "t", ([0], [1], 4 << 20)),
                 ("all-to-all batch, staggered", "t", (*pairwise(n), 18 * 256 * (16 if n > 8 else 64)))]
        for op in ("all_reduce", "all_to_all", "all_gather"):
            cases.append((f"{op} {a.size}", "c", (op, size // (n * n * 4) * (n * n * 4))))
        for label, kind, args in cases:
            row = []
            for fid in ("packet", "flow", "auto"):
                t0 = time.perf_counter()
                if kind == "t":
                    r = flitsim.transfers(fabric_preset(name), *args, fidelity=fid)
                    row.append((r.makespan_ps / 1e6, time.perf_counter() - t0, r.fidelity, r.fidelity_reason, ""))
                else:
                    r = flitsim.collective(name, args[0], args[1], fidelity=fid)
                    row.append((r.time_us, time.perf_counter() - t0, r.stats["fidelity"], r.stats["fidelity_reason"],
                                r.algorithm))
            (p, pw, *_), (f, fw, *_), (_, _, af, ar, alg) = row
            why = ar.split(":", 2)[1].strip() if ":" in ar else ar
            print(f"| {name} | {label}{' (' + alg + ')' if alg else ''} | {p:.2f} | {f:.2f} | {f / p - 1:+.2%} | "
                  f"{pw:.2f} | {fw:.3f} | {af}: {why} |", flush=True)


if __name__ == "__main__":
    main()
