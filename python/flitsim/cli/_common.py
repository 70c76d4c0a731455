"""Shared CLI helpers: byte-size parsing, JSON output, error reporting."""

from __future__ import annotations

import functools
import os
import sys
import json
from typing import Any, Callable, TypeVar

import click
import numpy as np

from flitsim.errors import ConfigError

F = TypeVar("F", bound=Callable[..., Any])

def parse_bytes(text: str) -> int:
    """Parse a size with :func:`flitsim.sizes.parse_bytes` (K = KB = KiB = 1024,
    as in nccl-tests).

    Raises:
        ConfigError: if the text is not a whole number of bytes.
    """
    from flitsim.sizes import parse_bytes as parse

    return parse(text)


class ByteSize(click.ParamType):
    """click type for :func:`parse_bytes`."""

    name = "size"

    def convert(self, value: Any, param: Any, ctx: Any) -> int:
        try:
            return parse_bytes(value)
        except ConfigError as e:
            self.fail(str(e), param, ctx)


def _jsonable(o: Any) -> Any:
    if isinstance(o, np.ndarray):
        return o.tolist()
    if isinstance(o, np.generic):
        return o.item()
    raise TypeError(f"not JSON serializable: {type(o)}")


def _finite(o: Any) -> Any:
    """``o`` with every non-finite float (NaN, inf) as None: strict JSON has no NaN."""
    if isinstance(o, float) and not np.isfinite(o):
        return None
    if isinstance(o, dict):
        return {k: _finite(v) for k, v in o.items()}
    if isinstance(o, (list, tuple)):
        return [_finite(v) for v in o]
    return o


def echo_json(obj: Any) -> None:
    """Print ``obj`` as indented, strict JSON (numpy arrays become lists; NaN
    and inf become null)."""
    click.echo(json.dumps(_finite(json.loads(json.dumps(obj, default=_jsonable))), indent=2, allow_nan=False))


def friendly_errors(fn: F) -> F:
    """Turn ConfigError/StalledError into a one-line message and exit code 2;
    Ctrl-C (and SIGTERM, treated alike so worker pools are terminated and
    temporary folders removed) into ``KeyboardInterrupt`` on stderr and exit
    code 130, the shell's convention for SIGINT."""

    @functools.wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        from flitsim.errors import StalledError
        from flitsim.interrupt import sigterm_as_sigint

        try:
            with sigterm_as_sigint():
                return fn(*args, **kwargs)
        except (ConfigError, StalledError) as e:
            raise click.UsageError(f"{type(e).__name__}: {e}") from None
        except KeyboardInterrupt:
            click.echo("KeyboardInterrupt: stopped", err=True)
            sys.exit(130)

    return wrapper  # type: ignore[return-value]


def check_out_dir(field: str, path: str) -> None:
    """Fail early (before a long fit or simulation) if ``path``'s folder is missing.

    Raises:
        ConfigError: naming ``field`` and the missing directory.
    """
    import os

    d = os.path.dirname(os.path.abspath(path))
    if not os.path.isdir(d):
        raise ConfigError(f"{field} = {path!r}: directory {d!r} does not exist")


def check_plot_path(path: str) -> None:
    """Fail early (before a long simulation) if a figure cannot be written to ``path``.

    An existing file is replaced only if it is a figure (an earlier plot);
    anything else the user wrote there is refused, never overwritten.

    Raises:
        ConfigError: missing directory, a format matplotlib cannot write, or an
            existing file that is not a figure.
    """
    import os

    check_out_dir("plot", path)
    d = os.path.dirname(os.path.abspath(path))
    if os.path.isdir(path):
        raise ConfigError(f"plot = {path!r}: is a directory; give a file name such as {os.path.join(path, 'plot.png')!r}")
    if not os.access(d, os.W_OK):
        raise ConfigError(f"plot = {path!r}: directory {d!r} is not writable")
    ext = os.path.splitext(path)[1].lstrip(".").lower()
    ok = ("png", "pdf", "svg", "jpg", "jpeg", "eps", "ps", "tif", "tiff", "webp")
    if ext not in ok:
        raise ConfigError(f"plot = {path!r}: the file extension must be one of {list(ok)}")
    if os.path.isfile(path) and os.path.getsize(path) > 0 and not _is_earlier_plot(path, ext):
        raise ConfigError(f"plot = {path!r}: an existing file that is not a matplotlib figure (refusing to "
                          "overwrite it: move it away or choose another name)")


_MAGIC = {"jpg": b"\xff\xd8\xff", "jpeg": b"\xff\xd8\xff", "tif": (b"II*\x00", b"MM\x00*"),
          "tiff": (b"II*\x00", b"MM\x00*"), "webp": b"RIFF"}


def _is_earlier_plot(path: str, ext: str) -> bool:
    """Whether the file at ``path`` looks like a figure a previous run wrote, so
    replacing it loses nothing the user wrote: matplotlib names itself in PNG,
    SVG, EPS and PS heads and in a PDF's trailer; JPEG, TIFF and WebP carry no
    writer, so their magic bytes must match the extension."""
    with open(path, "rb") as fh:
        head = fh.read(4096)
        fh.seek(max(0, os.path.getsize(path) - 4096))
        tail = fh.read()
    if ext in _MAGIC:
        return head.startswith(_MAGIC[ext])
    return b"matplotlib" in head.lower() or b"matplotlib" in tail.lower()


def format_option(extra: tuple[str, ...] = ()) -> Callable[[F], F]:
    """``--format text|markdown|csv|json`` (plus ``extra`` choices): default
    rich on a terminal, plain aligned text when stdout is piped. An unknown
    value is a usage error before anything runs (click.Choice)."""
    from flitsim.cli._table import FORMATS

    return click.option("--format", "fmt", type=click.Choice(list(FORMATS) + list(extra)), default=None,
                        help="Output format (default: a boxed table on a terminal, plain aligned text "
                             "when piped). json = --json.")
