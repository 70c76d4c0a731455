"""Tables the CLI prints, in the form the reader's output can hold.

A :class:`Table` collects a title, columns and string cells (the same calls as
``rich.table.Table``); :class:`Printer` writes tables and lines in one of
:data:`FORMATS`:

- ``rich``: rich's boxed table, only when stdout is a terminal (the default there);
- ``text``: plain aligned columns at full width, never cut (the default when
  stdout is a pipe, a file or a CI log);
- ``markdown``: a GitHub pipe table per table, ``###`` title;
- ``csv``: RFC 4180 rows; with several tables each starts with a ``# title`` line;
- ``json``: handled by each command (its structured result, same as ``--json``).
"""

from __future__ import annotations

import csv
import io
import sys
from typing import Any, Literal

import click

__all__ = ["FORMATS", "Table", "Printer", "resolve_format"]

FORMATS = ("text", "markdown", "csv", "json")
"""Values of ``--format`` (plus ``rich``, the terminal default)."""

Justify = Literal["left", "right", "center", "default", "full"]


def _plain(s: str) -> str:
    """Cell text without rich markup (``[bold]x[/bold]`` -> ``x``)."""
    if "[" not in s:
        return s
    from rich.text import Text

    try:
        return Text.from_markup(s).plain
    except Exception:  # text that only looks like markup (e.g. "[1, 2]")
        return s


class Table:
    """A titled table of string cells (API subset of ``rich.table.Table``)."""

    def __init__(self, title: str = "") -> None:
        self.title = title
        self.columns: list[str] = []
        self.justify: list[str] = []
        self.rows: list[list[str]] = []

    def add_column(self, name: str, justify: Justify = "left", **_: Any) -> None:
        """A column; rich-only layout keywords (no_wrap, overflow, min_width) are accepted."""
        self.columns.append(str(name))
        self.justify.append("right" if justify == "right" else "left")

    def add_row(self, *cells: Any) -> None:
        """One row; cells are turned into strings (None -> empty)."""
        self.rows.append(["" if c is None else str(c) for c in cells])

    # ------------------------------------------------------------------ rendering
    def to_text(self) -> str:
        """Plain aligned columns at full width: title, header, dashes, rows."""
        head = [c.replace("\n", " ") for c in self.columns]
        body = [[_plain(c).replace("\n", " ") for c in r] for r in self.rows]
        w = [max([len(h)] + [len(r[i]) for r in body if i < len(r)]) for i, h in enumerate(head)]

        def line(cells: list[str]) -> str:
            out = []
            for i, c in enumerate(cells):
                wi = w[i] if i < len(w) else len(c)
                out.append(c.rjust(wi) if i < len(self.justify) and self.justify[i] == "right" else c.ljust(wi))
            return "  ".join(out).rstrip()

        lines = [self.title] if self.title else []
        lines += [line(head), "  ".join("-" * x for x in w).rstrip()] + [line(r) for r in body]
        return "\n".join(lines)

    def to_markdown(self) -> str:
        """GitHub pipe table (``|`` in cells escaped), ``### title`` above it."""
        def esc(s: str) -> str:
            return _plain(s).replace("|", "\\|").replace("\n", " ")

        lines = [f"### {self.title}", ""] if self.title else []
        lines.append("| " + " | ".join(esc(c) for c in self.columns) + " |")
        lines.append("|" + "|".join("---:" if j == "right" else "---" for j in self.justify) + "|")
        lines += ["| " + " | ".join(esc(c) for c in r) + " |" for r in self.rows]
        return "\n".join(lines)

    def to_csv(self, with_title: bool = False) -> str:
        """CSV with a header row; ``with_title``: a ``# title`` line first."""
        buf = io.StringIO()
        if with_title and self.title:
            buf.write(f"# {self.title}\n")
        wr = csv.writer(buf, lineterminator="\n")
        wr.writerow([c.replace("\n", " ") for c in self.columns])
        for r in self.rows:
            wr.writerow([_plain(c) for c in r])
        return buf.getvalue().rstrip("\n")

    def to_rich(self) -> Any:
        """The same table as a ``rich.table.Table`` (terminal output)."""
        from rich.table import Table as RichTable

        t = RichTable(title=self.title or None)
        for c, j in zip(self.columns, self.justify):
            t.add_column(c, justify=j, overflow="fold")  # type: ignore[arg-type]
        for r in self.rows:
            t.add_row(*r)
        return t


def resolve_format(fmt: str | None, as_json: bool = False) -> str:
    """The output format: ``json`` with ``--json``; the given one; else ``rich``
    on a terminal and ``text`` when stdout is piped or redirected."""
    if as_json:
        return "json"
    if fmt:
        return fmt
    return "rich" if sys.stdout.isatty() else "text"


class Printer:
    """Writes :class:`Table` s and lines to stdout in one format (see the
    module docstring). Tables are separated by a blank line."""

    def __init__(self, fmt: str | None = None) -> None:
        self.fmt = resolve_format(fmt)
        self._tables = 0
        self._console: Any = None

    def print(self, obj: "Table | str" = "") -> None:
        """Print a table or a line (rich markup is stripped outside a terminal;
        in csv, lines become ``#`` comments so the rows stay machine-readable)."""
        if self.fmt == "rich":
            if self._console is None:
                from rich.console import Console

                self._console = Console()
            self._console.print(obj.to_rich() if isinstance(obj, Table) else obj)
            return
        if isinstance(obj, Table):
            if self._tables:
                click.echo("")
            self._tables += 1
            if self.fmt == "markdown":
                click.echo(obj.to_markdown())
            elif self.fmt == "csv":
                click.echo(obj.to_csv(with_title=True))
            else:
                click.echo(obj.to_text())
            return
        text = _plain(str(obj))
        click.echo(("# " + text if text else "") if self.fmt == "csv" else text)
