"""Chunk trains against the chunk-by-chunk run on random plain task graphs
(docs/fidelity.md "Chunk trains"): 2-5 staged
copies of 8-256 MiB between random GPUs of a fabric, some started after
compute, each graph run at flow level with trains on and with
FLITSIM_CHUNK_TRAINS=0. Prints how many moved the makespan by more than 1 %
and the worst ones. Prints only (no timed assertions).

    PYTHONPATH=python python3 benches/chunk_train_check.py [PRESET] [GRAPHS] [SEED]

e.g. ``pcie-8xl20 80 1``, ``eth-2x8xl40 60 2``, ``ib-4xhgx-h100 60 3`` (the
docs' figures).
"""
from __future__ import annotations

import os
import random
import sys
import warnings

from flitsim.hardware.fabric import fabric_preset
from flitsim.networks import FabricNetwork
from flitsim.taskgraph import TaskGraphBuilder, execute

MiB = 1 << 20


def main() -> None:
    preset = sys.argv[1] if len(sys.argv) > 1 else "pcie-8xl20"
    n = int(sys.argv[2]) if len(sys.argv) > 2 else 40
    rng = random.Random(int(sys.argv[3]) if len(sys.argv) > 3 else 1)
    spec = fabric_preset(preset, fidelity="flow")
    gpus = spec.gpus
    rows = []
    warnings.simplefilter("ignore")
    for _ in range(n):
        xs = []
        for _ in range(rng.randint(2, 5)):
            s = rng.randrange(gpus)
            d = rng.choice([x for x in range(gpus) if x != s])
            xs.append((s, d, rng.choice([8, 32, 64, 128, 256]) * MiB, rng.choice([0, 0, 1, 2, 4, 6]) * 10**9))
        out = {}
        for env in ("1", "0"):
            os.environ["FLITSIM_CHUNK_TRAINS"] = env
            g = TaskGraphBuilder(devices=gpus, comm_streams=4)
            for s, d, b, t0 in xs:
                t = g.add_transfer(s, d, b)
                if t0:
                    g.add_edge(g.add_compute(s, t0), t)
            out[env] = execute(g.build(), FabricNetwork(spec))
        rel = out["1"].makespan_ps / out["0"].makespan_ps - 1.0
        rows.append((abs(rel), rel, out["1"].network["chunk_trains"], xs))
    os.environ.pop("FLITSIM_CHUNK_TRAINS", None)
    rows.sort(key=lambda r: -r[0])
    print(f"{preset}: {n} random graphs, {sum(r[0] > 0.01 for r in rows)} moved by more than 1 %; worst:")
    for a, rel, trains, xs in rows[:4]:
        print(f"  {100 * rel:+.3f} %  trains {trains}  copies (src, dst, MiB, start ms) "
              f"{[(s, d, b // MiB, t0 / 1e9) for s, d, b, t0 in xs]}")


if __name__ == "__main__":
    main()
