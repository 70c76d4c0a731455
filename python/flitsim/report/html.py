"""The HTML report page: a Jinja2 template (``templates/report.html.j2``)
filled from a plain context dict, so the page's layout lives in one file and
the writer (:mod:`flitsim.scenario.write`) only gathers data.

Layout (top to bottom): the answer (conclusion lines, then the map section
when the writer supplies one, then the verdict overview), one
"relative to the fastest schedule" chart per case, the run summary, one
collapsible section per case (its scorecard, critical path, latencies,
figures and links to its trace and task table), the files, and provenance
(flitsim version, git commit, machine, wall times, fidelity per run, the
scenario file verbatim). A table of contents links every section; the page
has no external resources (figures are embedded PNGs).
"""

from __future__ import annotations

import html as _html
from typing import Any

__all__ = ["VERDICT_CLASS", "verdict_class", "render_report", "table_html"]

VERDICT_CLASS = {
    "good": ("holds", "fits", "comparable", "exact", "loose", "compute-bound", "steady", "small", "rare",
             "comm hidden", "ok"),
    "fair": ("partly", "convert", "moderate", "balanced", "uneven", "costly", "noticeable",
             "stated"),
    "bad": ("fails", "does not fit", "dense", "comm-bound", "unbalanced", "dominant", "limiting",
            "comm-dominated", "oom"),
}
"""Scorecard / conclusion verdict words by colour class (good = green,
fair = amber, bad = red; anything else is uncoloured)."""

_CLASS_OF = {w: c for c, ws in VERDICT_CLASS.items() for w in ws}


def verdict_class(verdict: Any) -> str:
    """CSS class of a verdict word (``good`` / ``fair`` / ``bad`` / ``na``)."""
    return _CLASS_OF.get(str(verdict).strip().lower(), "na")


def table_html(df: Any, *, verdict_col: str | None = "verdict", max_rows: int | None = None) -> str:
    """A DataFrame as an HTML table (escaped; floats to 4 significant
    digits; a ``verdict`` column's cells get their colour class)."""
    import pandas as pd

    if df is None or len(df) == 0:
        return "<p class='muted'>(none)</p>"
    d = df if max_rows is None else df.head(max_rows)
    cols = list(d.columns)
    out = ["<div class='scroll'><table class='t'><thead><tr>"]
    out += [f"<th>{_html.escape(str(c))}</th>" for c in cols]
    out.append("</tr></thead><tbody>")
    for row in d.itertuples(index=False):
        out.append("<tr>")
        for c, v in zip(cols, row):
            if isinstance(v, float):
                txt = "" if pd.isna(v) else f"{v:.4g}"
            elif v is None or (not isinstance(v, (list, tuple, dict)) and pd.isna(v)):
                txt = ""
            else:
                txt = str(v)
            cls = f" class='v {verdict_class(v)}'" if verdict_col and c == verdict_col else ""
            num = " class='n'" if isinstance(v, (int, float)) and not isinstance(v, bool) and not cls else ""
            out.append(f"<td{cls or num}>{_html.escape(txt)}</td>")
        out.append("</tr>")
    out.append("</tbody></table></div>")
    if max_rows is not None and len(df) > max_rows:
        out.append(f"<p class='muted'>first {max_rows} of {len(df)} rows; the full table is in the files below</p>")
    return "".join(out)


def render_report(context: dict[str, Any]) -> str:
    """Render the report page from ``context`` (keys: see the template;
    missing optional keys render as absent sections)."""
    import jinja2

    env = jinja2.Environment(loader=jinja2.PackageLoader("flitsim.report", "templates"),
                             autoescape=jinja2.select_autoescape(["html", "j2"]), undefined=jinja2.StrictUndefined,
                             trim_blocks=True, lstrip_blocks=True)
    env.filters["vclass"] = verdict_class
    defaults: dict[str, Any] = {"description": "", "answer": [], "map": None, "overview": None, "relative": [],
                                "summary_html": "", "cases": [], "files": [], "provenance": {}, "notes": []}
    return env.get_template("report.html.j2").render(**{**defaults, **context})
