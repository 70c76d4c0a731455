"""nccl-tests text output: read real logs, write simulated ones in the same layout.

nccl-tests (github.com/NVIDIA/nccl-tests, src/common.cu) prints comment lines
starting with ``#`` (the run header, one ``#  Rank  r Group ... device`` line per
rank, the two-line column header), then one data row per size::

    #       size         count      type   redop    root     time   algbw   busbw #wrong     time   algbw   busbw #wrong
    #        (B)    (elements)                               (us)  (GB/s)  (GB/s)            (us)  (GB/s)  (GB/s)
         1048576        262144     float     sum      -1    37.24   28.16   49.28      0    37.10   28.26   49.46      0

(out-of-place columns first, in-place second; ``#wrong`` is ``N/A`` when
checking is off), and ``# Avg bus bandwidth    : 105.283`` at the end. Older
builds print no ``root`` column. :func:`parse` reads both; :func:`format_table`
prints a simulated sweep the same way, so parsers people already have read it.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from flitsim.collectives import NCCL_TYPE_BYTES, PER_RANK_COUNT_OPS
from flitsim.errors import ConfigError

if TYPE_CHECKING:
    import pandas as pd

# nccl-tests binary name fragments -> flitsim op names
_OPS = {"all_reduce": "all_reduce", "allreduce": "all_reduce", "all_gather": "all_gather", "allgather": "all_gather",
        "reduce_scatter": "reduce_scatter", "reducescatter": "reduce_scatter", "alltoall": "all_to_all",
        "all_to_all": "all_to_all", "broadcast": "broadcast", "sendrecv": "sendrecv", "reduce": "reduce"}
_NUM = r"[-+]?(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?"


@dataclass(frozen=True)
class NcclLog:
    """One parsed nccl-tests log.

    Attributes:
        path: where it came from ("<text>" for a string).
        op: flitsim op name, or None when neither the caller, the file name
            nor the busbw/algbw ratio says which.
        ranks: GPUs in the run (``#  Rank`` lines), or None if not printed.
        rows: one dict per size: size, count, type, redop, root, and for each
            placement (``oop`` out-of-place, ``ip`` in-place) time_us,
            algbw_GBps, busbw_GBps, wrong (int, or None for N/A), plus ``line``
            (1-based line number in the log).
        avg_busbw_GBps: the ``# Avg bus bandwidth`` line, or None.
        algorithm, protocol: from NCCL's own ``NCCL_ALGO`` / ``NCCL_PROTO
            set by environment to ...`` INFO lines (NCCL_DEBUG=INFO), lower
            case, or None (NCCL chose).
        header_gpus: ``nThread`` x ``nGpus`` from the ``# nThread`` header
            (GPUs per process: the whole run for a single-process run), or None.
    """

    path: str
    op: str | None
    ranks: int | None
    rows: list[dict[str, Any]] = field(default_factory=list)
    avg_busbw_GBps: float | None = None
    algorithm: str | None = None
    protocol: str | None = None
    header_gpus: int | None = None

    def to_pandas(self) -> "pd.DataFrame":
        import pandas as pd

        return pd.DataFrame(self.rows)


def _op_from_name(name: str) -> str | None:
    base = Path(name).name.lower().replace("-", "_")
    for key in sorted(_OPS, key=len, reverse=True):
        if key in base:
            return _OPS[key]
    return None


def _wrong(tok: str, where: str) -> int | None:
    if tok.upper() == "N/A":
        return None
    try:
        return int(float(tok))
    except ValueError:
        raise ConfigError(f"{where}: #wrong = {tok!r}: expected an integer or N/A") from None


REDOPS = ("sum", "prod", "max", "min", "avg", "mulsum", "none")
"""The redop column's values in nccl-tests (``test_opNames`` in its
src/common.cu; ``none`` for collectives without a reduction)."""


TYPE_BYTES = NCCL_TYPE_BYTES
"""Bytes per element of the type column's values (nccl-tests' names;
:data:`flitsim.collectives.NCCL_TYPE_BYTES`)."""


def _check_count(rows: list[dict[str, Any]], op: str | None, n: int | None, label: str) -> None:
    """Refuse a row whose count column disagrees with size and type (a hand-edited
    or mixed-up log: the simulator runs ``size`` bytes, so one of the two is wrong)."""
    for r in rows:
        e = TYPE_BYTES[r["type"]]
        if op is not None and n:
            ranks = n if op in PER_RANK_COUNT_OPS else 1
            ok = r["count"] * e * ranks == r["size"]
            want = f"size / ({e} B per {r['type']}{f' x {ranks} ranks' if ranks > 1 else ''}) = {r['size'] / (e * ranks):g}"
        else:  # op or ranks unknown: count is size / e, or size / e / ranks for some rank count
            ok = r["count"] * e == r["size"] or (r["count"] > 0 and r["size"] % (r["count"] * e) == 0)
            want = f"size / {e} B per {r['type']} (or that / ranks for per-rank ops) = {r['size'] / e:g}"
        if not ok:
            raise ConfigError(f"{label}:{r['line']}: count = {r['count']} elements: expected {want} for size = "
                              f"{r['size']} B{f' ({op} over {n} ranks)' if op and n else ''}; the log's size and "
                              "count columns disagree")


def parse(source: str | Path, *, op: str | None = None, text: str | None = None) -> NcclLog:
    """Parse nccl-tests text output.

    Args:
        source: a path to a log file, or a label when ``text`` is given.
        op: the collective (``all_reduce`` ...); default: from the file name
            (``all_reduce_perf.log``), else from busbw / algbw (2(n-1)/n is
            all_reduce), else None.
        text: the log's text (instead of reading ``source``).

    Raises:
        ConfigError: an unreadable file, a data row that does not parse (the
            message gives the line number and the line), a log without data
            rows, busbw / algbw inconsistent with the op, a redop or type
            nccl-tests does not print (allowed: :data:`REDOPS`,
            :data:`TYPE_BYTES`), a count column that disagrees with size and
            type (:data:`PER_RANK_COUNT_OPS`).
    """
    label = str(source)
    if text is None:
        try:
            text = Path(source).read_text(encoding="utf-8", errors="replace")
        except OSError as e:
            raise ConfigError(f"log = {label!r}: cannot read it ({e.strerror or e})") from None
    ranks = 0
    avg = None
    rows: list[dict[str, Any]] = []
    has_root = True
    env: dict[str, str] = {}
    header_gpus = None
    for ln, raw in enumerate(text.splitlines(), 1):
        line = raw.strip()
        if not line:
            continue
        m = re.search(r"NCCL_(ALGO|PROTO) set by environment to (\S+)", line)
        if m:
            env[m.group(1)] = m.group(2).lower()
        if re.search(r"\bNCCL (INFO|WARN)\b", line):
            continue  # NCCL_DEBUG output interleaved with the table
        if line.startswith("#"):
            body = line[1:].strip()
            m = re.search(r"\bnThread\s+(\d+)\s+nGpus\s+(\d+)", body)
            if m:
                header_gpus = int(m.group(1)) * int(m.group(2))
            if re.match(r"Rank\s+\d+\s", body):
                ranks += 1
            elif body.startswith("size") and "count" in body:
                has_root = "root" in body.split()
            elif body.lower().startswith("avg bus bandwidth"):
                m = re.search(_NUM + r"\s*$", body)
                if not m:
                    raise ConfigError(f"{label}:{ln}: cannot read the average line {raw.strip()!r}")
                avg = float(m.group(0))
            continue
        tok = line.split()
        where = f"{label}:{ln}"
        # size count type redop [root] then 4 columns per placement
        want = 13 if has_root else 12
        if len(tok) != want:
            if len(tok) in (12, 13) and tok[0].isdigit():
                want, has_root = len(tok), len(tok) == 13
            else:
                raise ConfigError(f"{where}: cannot parse {raw.strip()!r}: expected a nccl-tests data row "
                                  f"(size count type redop{' root' if has_root else ''} time algbw busbw #wrong "
                                  "time algbw busbw #wrong) or a '#' comment")
        try:
            size, count = int(tok[0]), int(tok[1])
            k = 5 if has_root else 4
            root = int(tok[4]) if has_root else -1
            vals = [float(tok[k]), float(tok[k + 1]), float(tok[k + 2])]
            ip = [float(tok[k + 4]), float(tok[k + 5]), float(tok[k + 6])]
        except ValueError:
            raise ConfigError(f"{where}: cannot parse {raw.strip()!r}: size and count must be integers, "
                              "time/algbw/busbw numbers") from None
        if size < 0 or count < 0 or min(vals + ip) < 0:
            raise ConfigError(f"{where}: negative value in {raw.strip()!r}")
        if tok[3] not in REDOPS:
            raise ConfigError(f"{where}: redop = {tok[3]!r}: expected one of {list(REDOPS)} (nccl-tests' names)")
        if tok[2] not in TYPE_BYTES:
            raise ConfigError(f"{where}: type = {tok[2]!r}: expected one of {list(TYPE_BYTES)} (nccl-tests' names)")
        rows.append({"size": size, "count": count, "type": tok[2], "redop": tok[3], "root": root,
                     "time_us_oop": vals[0], "algbw_GBps_oop": vals[1], "busbw_GBps_oop": vals[2],
                     "wrong_oop": _wrong(tok[k + 3], where), "time_us_ip": ip[0], "algbw_GBps_ip": ip[1],
                     "busbw_GBps_ip": ip[2], "wrong_ip": _wrong(tok[k + 7], where), "line": ln})
    if not rows:
        raise ConfigError(f"log = {label!r}: no nccl-tests data rows found (is it an nccl-tests output file?)")
    n = ranks or None
    if op is None:
        op = _op_from_name(label)
    if op is None and n:
        op = _op_from_ratio(rows, n)
    if op is not None and n:
        from flitsim.collectives import busbw_factor

        f = busbw_factor(op, n)
        for r in rows:
            if r["algbw_GBps_oop"] >= 1.0:
                ratio = r["busbw_GBps_oop"] / r["algbw_GBps_oop"]
                if abs(ratio - f) > 0.02 * f + 0.01:
                    raise ConfigError(f"{label}:{r['line']}: busbw / algbw = {ratio:.3f}, but {op} over {n} ranks "
                                      f"has factor {f:.3f} (nccl-tests PERFORMANCE.md): wrong --op or GPU count?")
    _check_count(rows, op, n, label)
    return NcclLog(label, op, n, rows, avg, env.get("ALGO"), env.get("PROTO"), header_gpus)


def _op_from_ratio(rows: list[dict[str, Any]], n: int) -> str | None:
    big = [r for r in rows if r["algbw_GBps_oop"] >= 1.0]
    if not big:
        return None
    ratio = big[-1]["busbw_GBps_oop"] / big[-1]["algbw_GBps_oop"]
    if abs(ratio - 2 * (n - 1) / n) < 0.02:
        return "all_reduce"
    return None


def format_table(df: "pd.DataFrame", *, op: str, ngpus: int, fabric: str, minbytes: int, maxbytes: int,
                 stepfactor: int, iters: int = 20, warmup: int = 5) -> str:
    """nccl-tests' text layout for a simulated sweep (``flitsim nccl-tests
    --format nccl-tests``): header comments, one ``#  Rank`` line per GPU,
    both placement columns (the simulator has one answer: in-place repeats
    out-of-place), ``#wrong`` = 0 and the ``# Avg bus bandwidth`` line."""
    out = [f"# flitsim simulated {op}_perf on {fabric} (not a measurement)",
           f"# nThread 1 nGpus {ngpus} minBytes {minbytes} maxBytes {maxbytes} step: {stepfactor}(factor) "
           f"warmup iters: {warmup} iters: {iters} agg iters: 1 validation: 0 graph: 0",
           "#", "# Using devices"]
    out += [f"#  Rank {r:2d} Group  0 Pid      0 on  flitsim device {r:2d} [0x00] simulated {fabric}"
            for r in range(ngpus)]
    out += ["#",
            "#                                                              out-of-place                       in-place          ",
            "#       size         count      type   redop    root     time   algbw   busbw #wrong     time   algbw   busbw #wrong",
            "#        (B)    (elements)                               (us)  (GB/s)  (GB/s)            (us)  (GB/s)  (GB/s)       "]
    for r in df.itertuples():
        cols = (f"{r.time_us:8.2f} {r.algbw_GBps:7.2f} {r.busbw_GBps:7.2f} {0:6d}")
        out.append(f"{r.size:12d}  {r.count:12d}  {r.type:>8s}  {r.redop:>6s}  {r.root:6d}  {cols}  {cols}")
    avg = float(df["busbw_GBps"].mean()) if len(df) else 0.0
    out += ["# Out of bounds values : 0 OK", f"# Avg bus bandwidth    : {avg:.3f} ", "#"]
    return "\n".join(out)
