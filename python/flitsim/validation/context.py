"""What a validation run runs on: the fabric (a case's own, or the user's
``--fabric``) and the collective calibration (defaults, or the user's
``--calibration`` file from ``flitsim calibrate nccl-tests``)."""

from __future__ import annotations

import os
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from flitsim.errors import ConfigError

if TYPE_CHECKING:
    from flitsim.hardware.fabric import FabricSpec
    from flitsim.validation.case import Case

_FABRIC_COMMENT = re.compile(r"^#\s*fabric:\s*([^;\s]+)", re.MULTILINE)


def resolve_fabric(fabric: "str | os.PathLike[str] | FabricSpec") -> "FabricSpec":
    """A FabricSpec from a preset name, a fabric TOML file or a spec.

    Raises:
        ConfigError: an unknown preset (the message lists them) or an unreadable file.
    """
    from flitsim.hardware.fabric import FabricSpec, as_fabric

    if isinstance(fabric, FabricSpec):
        return fabric
    text = os.fspath(fabric)
    if text.endswith(".toml") or os.sep in text:
        if not Path(text).is_file():
            raise ConfigError(f"fabric = {text!r}: no such fabric file")
        return FabricSpec.from_toml(text)
    return as_fabric(text)


def load_calibration(path: "str | os.PathLike[str] | dict[str, Any]") -> tuple[str, dict[str, Any]]:
    """(fabric name, collective parameters) of a calibration file.

    The fabric is the file's top-level ``fabric = "..."`` key (written by
    ``flitsim calibrate nccl-tests``), or, for files written before that key
    existed, its ``# fabric: NAME`` header comment. A dict needs a ``fabric`` key
    next to the parameters.

    Raises:
        ConfigError: an unreadable file, no ``[collective]`` table, unknown
            parameters, or no fabric recorded (a calibration is only valid on
            the fabric it was fitted on).
    """
    from flitsim.collectives import load_params

    if isinstance(path, dict):
        d = dict(path)
        fab = d.pop("fabric", None)
        params = load_params(d)
        where = "calibration (dict)"
    else:
        from flitsim._toml import read_toml

        p = Path(path)
        t = read_toml(p, "calibration")
        params = load_params(p)
        fab = t.get("fabric")
        if fab is None:
            m = _FABRIC_COMMENT.search(p.read_text(encoding="utf-8"))
            fab = m.group(1) if m else None
        where = f"calibration = {str(p)!r}"
    if not isinstance(fab, str) or not fab:
        raise ConfigError(f"{where}: the file does not say which fabric it was fitted on; add "
                          "fabric = \"<preset>\" at the top (flitsim calibrate nccl-tests writes it)")
    return fab, params


@dataclass(frozen=True)
class Context:
    """Passed to every case's ``compute(ctx)``.

    ``fabric_override``: the user's fabric (``--fabric``), replacing each case's own.
    ``calibration_fabric`` / ``params``: a calibration and the fabric it was fitted
    on; the parameters apply to cases running on that fabric only.
    ``fast``: the CI subset is being run. ``current``: the case being run (set
    by the runner), the default ``case`` of the methods below.
    """

    fabric_override: "FabricSpec | None" = None
    calibration_fabric: str | None = None
    params: dict[str, Any] = field(default_factory=dict)
    fast: bool = False
    current: "Case | None" = None

    def _case(self, case: "Case | None") -> "Case":
        c = case if case is not None else self.current
        if c is None:
            raise ConfigError("validation context: no case given and none is being run")
        return c

    def fabric_name(self, case: "Case | None" = None) -> str | None:
        """Name of the fabric ``case`` runs on (None if it uses none)."""
        case = self._case(case)
        if case.fabric is None:
            return None
        return self.fabric_override.name if self.fabric_override is not None else case.fabric

    def fabric(self, case: "Case | None" = None) -> "FabricSpec":
        """The FabricSpec ``case`` runs on.

        Raises:
            ConfigError: the case declares no fabric.
        """
        case = self._case(case)
        if case.fabric is None:
            raise ConfigError(f"validation case {case.id!r}: declares no fabric but asked for one")
        return self.fabric_override if self.fabric_override is not None else resolve_fabric(case.fabric)

    def collective_params(self, case: "Case | None" = None) -> dict[str, Any] | None:
        """The calibration's collective parameters if ``case`` runs on the
        calibration's fabric, else None (the calibrated defaults)."""
        case = self._case(case)
        if self.params and self.fabric_name(case) == self.calibration_fabric:
            return dict(self.params)
        return None
