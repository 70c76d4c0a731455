"""Tables of a validation report: plain text for terminals (never truncated,
whatever the width of the pipe), Markdown for docs, both from the same rows."""

from __future__ import annotations

import math
from typing import Any, Iterable, Sequence

from flitsim.validation.case import Case, Outcome
from flitsim.validation.runner import Report, SummaryRow, _row


def num(v: float | None) -> str:
    """A value with 4 significant digits (large ones whole), or '-'."""
    if v is None or (isinstance(v, float) and math.isnan(v)):
        return "-"
    if not math.isfinite(v):
        return "inf"
    a = abs(v)
    if a >= 1e4:
        return f"{v:,.0f}"
    if a == 0:
        return "0"
    return f"{v:.4g}"


def pct(v: float | None, signed: bool = True) -> str:
    if v is None:
        return "-"
    if not math.isfinite(v):
        return "inf"
    d = 2 if abs(v) < 1 else 1  # small errors (theory cases) keep a second digit
    return f"{v:+.{d}f}" if signed else f"{v:.{d}f}"


def case_rows(outcomes: Iterable[Outcome]) -> list[list[str]]:
    rows = []
    for o in outcomes:
        c = o.case
        tag = c.tag if c.tag != "calibration" else f"calibration ({c.fitted})"
        rows.append([c.id, c.quantity, c.system, tag, num(c.measured), num(o.simulated), c.unit,
                     pct(None if o.error is None else 100 * o.error), pct(100 * c.tolerance, False), o.verdict])
    return rows


CASE_HEAD = ["case", "quantity", "system", "tag", "measured", "simulated", "unit", "error %", "tol %", "verdict"]
SUMMARY_HEAD = ["tag", "system", "cases", "MAPE %", "worst %", "worst case", "failed", "known misses"]


def summary_rows(rows: Sequence[SummaryRow]) -> list[list[str]]:
    return [[r.tag, r.system, str(r.cases), pct(r.mape_pct, False), pct(r.worst_pct, False), r.worst_id,
             str(r.failed), str(r.known_misses)] for r in rows]


def markdown(head: Sequence[str], rows: Sequence[Sequence[str]], right: Iterable[int] = ()) -> str:
    right = set(right)
    esc = [[str(x).replace("|", "\\|") for x in r] for r in rows]
    out = ["| " + " | ".join(head) + " |", "|" + "|".join("---:" if i in right else "---" for i in range(len(head))) + "|"]
    out += ["| " + " | ".join(r) + " |" for r in esc]
    return "\n".join(out)


def text(head: Sequence[str], rows: Sequence[Sequence[str]], right: Iterable[int] = ()) -> str:
    right = set(right)
    w = [max([len(h)] + [len(r[i]) for r in rows]) for i, h in enumerate(head)]

    def line(r: Sequence[str]) -> str:
        return "  ".join(c.rjust(w[i]) if i in right else c.ljust(w[i]) for i, c in enumerate(r)).rstrip()
    return "\n".join([line(head), line(["-" * x for x in w])] + [line(r) for r in rows])


CASE_RIGHT = (4, 5, 7, 8)
SUMMARY_RIGHT = (2, 3, 4, 6, 7)


def headline(rep: Report) -> list[str]:
    """The figures users should read first: transfer apart from calibration."""
    by = {(r.tag, r.system): r for r in rep.summary()}
    out = []
    for tag, words in (("transfer", "transfer (no parameter was fitted on these data; the figure to believe)"),
                       ("calibration", "calibration (the data parameters were fitted on; shows the fit)"),
                       ("theory", "theory (closed forms and classic results)")):
        r = by.get((tag, "all"))
        if r is not None:
            line = (f"{words}: {r.cases} cases, MAPE {r.mape_pct:.1f} %, worst {r.worst_pct:.1f} % "
                    f"({r.worst_id}); {r.failed} failed, {r.known_misses} known misses")
            rest = [o for o in rep.outcomes if o.case.tag == tag and o.error is not None and o.verdict != "known miss"]
            if r.known_misses and rest:
                x = _row(tag, "all", rest)
                line += f"; without them MAPE {x.mape_pct:.1f} %, worst {x.worst_pct:.1f} %"
            out.append(line)
    skipped = [o for o in rep.outcomes if o.verdict == "skipped"]
    if skipped:
        out.append(f"skipped: {len(skipped)} cases (not run, never counted as passes)")
    return out


def report_text(rep: Report) -> str:
    parts = []
    if rep.fabric or rep.calibration:
        parts.append(f"fabric: {rep.fabric or 'each case its own'}; calibration: {rep.calibration or 'defaults'}")
    parts.append(text(CASE_HEAD, case_rows(rep.outcomes), CASE_RIGHT))
    notes = [f"  {o.case.id}: {o.verdict}: {o.note}" for o in rep.outcomes if o.note and o.verdict != "pass"]
    if notes:
        parts.append("notes:\n" + "\n".join(notes))
    parts.append("MAPE per tag and system:\n" + text(SUMMARY_HEAD, summary_rows(rep.summary()), SUMMARY_RIGHT))
    parts.append("\n".join(headline(rep)))
    parts.append(f"{len(rep.failed)} failed" if rep.failed else "no case failed")
    return "\n\n".join(parts) + "\n"


def report_markdown(rep: Report) -> str:
    parts = [markdown(CASE_HEAD, case_rows(rep.outcomes), CASE_RIGHT)]
    parts.append(markdown(SUMMARY_HEAD, summary_rows(rep.summary()), SUMMARY_RIGHT))
    parts.append("\n".join(f"- {h}" for h in headline(rep)))
    return "\n\n".join(parts) + "\n"


def case_list(cases: Sequence[Case]) -> str:
    rows = [[c.id, c.tag, c.system, "fast" if c.fast else "", c.quantity] for c in cases]
    return text(["case", "tag", "system", "fast", "quantity"], rows)


def to_jsonable(rep: Report) -> dict[str, Any]:
    d = rep.to_dict()
    for row in d["summary"]:
        for k in ("mape_pct", "worst_pct"):
            if not math.isfinite(row[k]):
                row[k] = None
    return d
