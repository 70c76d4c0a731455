"""Faults against closed forms and conservation (docs/faults.md): a dead
plane of GB200 NVL72 costs a bandwidth-bound all-to-all exactly 18/17 (17 of
the 18 links per GPU remain), and a plane that dies mid-run loses nothing
(delivered + replayed-and-delivered = sent, from the link statistics).
Packet level, unfolded, 4 KiB simulated packets (as benches/plane_failure.py)."""

from __future__ import annotations

from typing import Any

from flitsim.validation.case import Case

NB = 18 * 17 * 4096  # a multiple of 17 and 18 ports x packet: no port carries a packet more than another
_RUNS: dict[str, Any] = {}


def _fabric() -> Any:
    from flitsim.hardware.fabric import fabric_preset

    return fabric_preset("gb200-nvl72", sim_packet_bytes=4096).replace(fold_planes=False)


def _a2a(faults_at: int | None, clean_ps: int = 0) -> Any:
    import numpy as np

    from flitsim.transfers import transfers

    s = np.tile(np.arange(72), 71)
    d = (s + np.repeat(np.arange(1, 72), 72)) % 72
    f = None if faults_at is None else [{"kind": "plane", "switch": 7, "at_ps": faults_at}]
    return transfers(_fabric(), s, d, NB, faults=f)


def _clean() -> Any:
    if "clean" not in _RUNS:
        _RUNS["clean"] = _a2a(None)
    return _RUNS["clean"]


def _slowdown(ctx: Any) -> Any:
    c, a = _clean(), _a2a(0)
    return a.makespan_ps / c.makespan_ps, f"clean {c.makespan_ps / 1e6:.2f} us, dead plane {a.makespan_ps / 1e6:.2f} us"


def _conserved(ctx: Any) -> Any:
    c = _clean()
    m = _a2a(c.makespan_ps // 2)
    f = m.faults
    got = (f["delivered_bytes"] + f["replayed_delivered_bytes"]) / f["sent_bytes"]
    return got, f"lost {f['lost_packets']} packets, all replayed; link rx {int(m.links.rx_payload_bytes.sum())} B"


CASES = [
    Case(id="faults.nvl72_a2a_dead_plane_slowdown", area="faults",
         quantity="NVL72 all-to-all (72 x 71 x 1.2 MiB), one of 18 planes dead from t = 0: makespan / clean",
         unit="ratio", source=("NVIDIA DGX GB200 user guide (each GPU has one link to each of the 18 switch chips): "
                               "17 of 18 links remain, a bandwidth-bound exchange slows by 18/17"),
         measured=18 / 17, tolerance=0.01,
         tolerance_why="start-up and drain latency are not scaled by the lost plane (< 1 % of a 105 us run)",
         call=('flitsim.transfers(nvl72_unfolded, s, d, 18 * 17 * 4096, faults=[{"kind": "plane", "switch": 7, '
               '"at_ps": 0}]).makespan_ps / clean.makespan_ps'),
         compute=_slowdown, tag="theory", system="GB200 NVL72", size_band="1 MiB .. 256 MiB"),
    Case(id="faults.nvl72_a2a_plane_dies_nothing_lost", area="faults",
         quantity="NVL72 all-to-all, a plane dies at half time: (delivered + replayed) / sent", unit="ratio",
         source=("Pascal whitepaper (NVLink data link layer: unacknowledged packets kept for replay); conservation "
                 "of bytes"), measured=1.0, tolerance=0.0, tolerance_why="exact: no byte may be lost or duplicated",
         call=('flitsim.transfers(nvl72_unfolded, s, d, 18 * 17 * 4096, faults=[{"kind": "plane", "switch": 7, '
               '"at_ps": clean.makespan_ps // 2}]).faults'),
         compute=_conserved, tag="theory", system="GB200 NVL72", size_band="1 MiB .. 256 MiB"),
]
