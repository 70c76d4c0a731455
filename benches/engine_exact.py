"""Exactness record of the packet engine: every answer and statistic of a set of
collectives and transfer batches, digested, so that an engine speed change can be
checked to leave them bit-identical (docs/performance.md, packet-speed sections).

    python benches/engine_exact.py record tests/data/engine_exact.json   # with the reference build
    python benches/engine_exact.py check tests/data/engine_exact.json    # with the build under test
    python benches/engine_exact.py check FILE --all                       # the slow cases too (8 GiB ring)

Per case it stores a SHA-256 of every result column (collectives: time, bytes sent and
received per GPU, link bytes, packets, credit / arbitration / fault counters,
link-class bytes, fold reason; transfer batches: the transfers, links, switch_ports,
reorder and switch_links tables, counter samples, makespan, packets, faults) and the
headline figures in clear. `events` (the engine's event count) is stored apart: a
change that handles fewer events with the same answer changes only that figure.
`tests/test_engine_exact.py` runs the fast cases against the committed record."""

from __future__ import annotations

import hashlib
import json
import sys
import time
import warnings

import numpy as np


def _h(*parts: object) -> str:
    m = hashlib.sha256()
    for p in parts:
        if hasattr(p, "to_csv"):  # DataFrame: full-precision text, column names included
            m.update(p.to_csv(index=False).encode())
        elif isinstance(p, np.ndarray):
            m.update(str(p.dtype).encode() + str(p.shape).encode() + np.ascontiguousarray(p).tobytes())
        else:
            m.update(repr(p).encode())
        m.update(b"|")
    return m.hexdigest()


def _collective(fab, op, size, algo, proto="simple", faults=None):
    import flitsim
    r = flitsim.collective(fab, op, size, algorithm=algo, protocol=proto, faults=faults)
    s = r.stats
    keys = ("transfers", "sim_packet_bytes", "folded_planes", "fold_reason", "packets", "max_link_utilization",
            "credit_exhaustion_episodes", "arbitration_conflicts")
    digest = _h(r.time_us, r.algorithm, r.protocol, r.channels, r.chunk_bytes, r.bytes_sent, r.bytes_received,
                r.link_bytes_sent, r.link_bytes_received, *(s[k] for k in keys), np.asarray(s["link_class_payload_bytes"]),
                sorted(s["faults"].items()))
    return {"time_us": r.time_us, "packets": int(s["packets"]), "digest": digest}, int(s["events"])


def _transfers(fab, src, dst, nbytes, **kw):
    import flitsim
    r = flitsim.transfers(fab, src, dst, nbytes, **kw)
    c = r.counters
    cparts = [] if c is None else [c.time_ps, c.queue_flits, c.credits_in_use_flits, c.endpoint_credits_in_use_flits, c.output_flits]
    digest = _h(r.transfers, r.links, r.switch_ports, r.reorder, r.switch_links, *cparts, r.makespan_ps, r.folded_planes,
                r.fold_reason, r.packets, sorted(r.faults.items()))
    return {"makespan_ps": int(r.makespan_ps), "packets": int(r.packets), "digest": digest}, int(r.events)


def cases():
    """(name, slow, thunk) for every recorded case."""
    from flitsim import Fault
    from flitsim.hardware import CounterSpec, fabric_preset, uniform_fabric
    nvl = "gb200-nvl72"
    a2a = ([s for k in range(1, 72) for s in range(72)], [(s + k) % 72 for k in range(1, 72) for s in range(72)])
    out = [
        ("nvl72 ring all_reduce 1 GiB", False, lambda: _collective(nvl, "all_reduce", 1 << 30, "ring")),
        ("nvl72 ring all_reduce 8 GiB", True, lambda: _collective(nvl, "all_reduce", 8 << 30, "ring")),
        ("nvl72 ring all_reduce 64 MiB", False, lambda: _collective(nvl, "all_reduce", 64 << 20, "ring")),
        ("nvl72 ring all_reduce 4 MiB (chain-bound fold)", False, lambda: _collective(nvl, "all_reduce", 4 << 20, "ring")),
        ("nvl72 ring all_reduce 1 MiB, every plane", False,
         lambda: _collective(fabric_preset(nvl, fold_planes=False), "all_reduce", 1 << 20, "ring")),
        ("nvl72 nvls all_reduce 1 GiB (rank fold)", False, lambda: _collective(nvl, "all_reduce", 1 << 30, "nvls")),
        ("nvl72 nvls all_reduce 4 MiB, every rank (counters on)", False,
         lambda: _collective(fabric_preset(nvl, counters=CounterSpec(interval_ps=10**9)), "all_reduce", 4 << 20, "nvls")),
        ("nvl72 ring all_reduce 4 MiB LL128", False, lambda: _collective(nvl, "all_reduce", 4 << 20, "ring", "ll128")),
        ("hgx-h100 ring all_reduce 8 MiB", False, lambda: _collective("hgx-h100", "all_reduce", 8 << 20, "ring")),
        ("hgx-h100 tree all_reduce 16 MiB", False, lambda: _collective("hgx-h100", "all_reduce", 16 << 20, "tree")),
        ("hgx-h100 ring all_reduce 1 MiB LL", False, lambda: _collective("hgx-h100", "all_reduce", 1 << 20, "ring", "ll")),
        ("hgx-h100 nvls all_gather 4 MiB", False, lambda: _collective("hgx-h100", "all_gather", 4 << 20, "nvls")),
        ("hgx-b200 ring all_reduce 64 MiB", False, lambda: _collective("hgx-b200", "all_reduce", 64 << 20, "ring")),
        ("pcie-8xl20 ring all_reduce 4 MiB (graph fabric)", False, lambda: _collective("pcie-8xl20", "all_reduce", 4 << 20, "ring")),
        ("8 GPU x 4 planes, plane fault mid all_reduce", False,
         lambda: _collective(uniform_fabric(8, [1, 1, 1, 1]), "all_reduce", 4 << 20, "ring",
                             faults=[Fault(kind="plane", switch=1, at_ps=60_000_000)])),
        ("nvl72 all_to_all transfers 36 KiB per pair", False, lambda: _transfers(nvl, *a2a, 18 * 256 * 8)),
        ("nvl72 all_to_all transfers 36 KiB, every plane, counters", False,
         lambda: _transfers(fabric_preset(nvl, fold_planes=False, counters=CounterSpec(interval_ps=100_000, max_samples=256)),
                            *a2a, 18 * 256 * 8)),
        ("4 GPU x 2 planes, BER 1.9e-3 transfers", False,
         lambda: _transfers(uniform_fabric(4, [1, 1]).with_faults(ber=1.9e-3, seed=5), [0, 1, 2, 3], [2, 3, 1, 0], 1 << 18)),
        ("8 GPU x 4 planes, link fault transfers", False,
         lambda: _transfers(uniform_fabric(8, [1, 1, 1, 1]), list(range(8)), [(g + 3) % 8 for g in range(8)], 1 << 20,
                            faults=[Fault(kind="plane", switch=2, at_ps=2_000_000)])),
        ("pcie-8xl20 transfers GPU <-> host", False,
         lambda: _transfers("pcie-8xl20", [0, 1, 8, 9, 3], [8, 9, 5, 2, 8], [1 << 20, 1 << 19, 1 << 18, 1 << 20, 3 << 18])),
        ("ib-4xhgx-h100 transfers across nodes", False,
         lambda: _transfers("ib-4xhgx-h100", list(range(0, 32, 3)), [(g + 9) % 32 for g in range(0, 32, 3)], 1 << 20,
                            transport="auto")),
    ]
    return out


def main() -> None:
    mode, path = sys.argv[1], sys.argv[2]
    slow = "--all" in sys.argv or mode == "record"
    warnings.simplefilter("ignore")
    rec = {} if mode == "record" else json.load(open(path))
    out, bad = {}, []
    for name, is_slow, f in cases():
        if is_slow and not slow:
            continue
        c0 = time.process_time()
        got, events = f()
        cpu = time.process_time() - c0
        if mode == "record":
            out[name] = {**got, "events": events}
            print(f"{name}: {got} events {events} ({cpu:.2f} CPU-s)", flush=True)
        else:
            want = {k: v for k, v in rec[name].items() if k != "events"}
            ok = got == want
            bad += [] if ok else [name]
            print(f"{'ok  ' if ok else 'DIFF'} {name}: events {rec[name]['events']} -> {events} ({cpu:.2f} CPU-s)"
                  + ("" if ok else f"\n     want {want}\n     got  {got}"), flush=True)
    if mode == "record":
        json.dump({"how": "python benches/engine_exact.py record FILE (see its docstring)", **out}, open(path, "w"), indent=1)
    elif bad:
        sys.exit(f"{len(bad)} cases differ")


if __name__ == "__main__":
    main()
