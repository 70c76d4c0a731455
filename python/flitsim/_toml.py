"""Reading TOML files (fabrics, scenarios, sweeps) with one error convention."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

try:
    import tomllib
except ModuleNotFoundError:  # Python 3.10
    import tomli as tomllib  # type: ignore[no-redef]

from flitsim.errors import config_error


def read_toml(path: str | os.PathLike[str], what: str) -> dict[str, Any]:
    """Parse the UTF-8 TOML file at ``path``.

    Raises:
        ConfigError: naming ``what`` (e.g. ``"scenario"``) for a missing,
            unreadable or non-UTF-8 file, or invalid TOML.
    """
    try:
        return tomllib.loads(Path(path).read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise config_error(what, str(path), "an existing TOML file") from None
    except (OSError, TypeError, UnicodeDecodeError) as e:
        raise config_error(what, str(path), f"a readable UTF-8 TOML file ({e})") from None
    except tomllib.TOMLDecodeError as e:
        raise config_error(what, str(path), f"valid TOML ({e})") from None
