"""When each GPU communicates: the time its communication tasks spend in
each time bin (a run's task table binned), for the occupancy figure and the
Perfetto port counters. Transfers count for their source (tx) and destination
(rx); a collective for every member, both ways."""

from __future__ import annotations

from typing import Any

import numpy as np

__all__ = ["comm_activity"]


def comm_activity(t: Any, g: Any, mk: int, bins: int) -> tuple[np.ndarray, np.ndarray]:
    """Per GPU and time bin: ps of communication tasks sending from (tx) and
    delivering to (rx) it, shape (ndev, bins) each (vectorized in chunks:
    memory bounded by the chunk, not the run)."""
    ndev = g.devices
    edges = np.linspace(0, mk, bins + 1)
    tx = np.zeros((ndev, bins))
    rx = np.zeros((ndev, bins))
    kinds = t.kind.to_numpy()
    st = t.start_ps.to_numpy().astype(np.float64)
    en = t.end_ps.to_numpy().astype(np.float64)
    dev = t.device.to_numpy().astype(np.int64)
    peer = t.peer.to_numpy().astype(np.int64)
    offs = g.columns["group_offsets"].astype(np.int64)
    mem = g.columns["group_members"].astype(np.int64)
    grp = g.columns["group"].astype(np.int64)
    tr = np.nonzero((kinds == "transfer") & (dev != peer))[0]
    co = np.nonzero(kinds == "collective")[0]
    # collectives: one (task, member) row per member, sending and receiving
    if len(co):
        sizes = offs[grp[co] + 1] - offs[grp[co]]
        c_task = np.repeat(co, sizes)
        first = np.repeat(np.cumsum(sizes) - sizes, sizes)  # position of each row's task among the rows
        c_mem = mem[offs[grp[c_task]] + np.arange(len(c_task)) - first]
    else:
        c_task = c_mem = np.zeros(0, np.int64)
    chunk = 1 << 15
    for tasks, src, dst in ((tr, dev[tr], peer[tr]), (c_task, c_mem, c_mem)):
        for k in range(0, len(tasks), chunk):
            i = tasks[k:k + chunk]
            ov = np.clip(np.minimum(edges[1:][None, :], en[i][:, None]) - np.maximum(edges[:-1][None, :], st[i][:, None]),
                         0, None)
            np.add.at(tx, src[k:k + chunk], ov)
            np.add.at(rx, dst[k:k + chunk], ov)
    return tx, rx
