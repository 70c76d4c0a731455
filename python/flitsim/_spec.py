"""Base class of every user-facing spec: small, validated, immutable, and
round-trippable to dict/JSON/TOML. Validation errors surface as ConfigError."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, ValidationError

from flitsim.errors import ConfigError, from_validation_error


class Spec(BaseModel):
    """Frozen pydantic model; unknown keys are rejected.

    Raises:
        ConfigError: on any invalid field (wrong type, out of range, unknown
            key), naming the field path, the value and the rule.
    """

    model_config = ConfigDict(frozen=True, extra="forbid", validate_default=True)

    def __init__(self, **data: Any) -> None:
        try:
            super().__init__(**data)
        except ValidationError as e:
            raise from_validation_error(e, type(self).__name__) from None

    @classmethod
    def from_dict(cls, data: Any) -> "Spec":
        """Build from a plain dict (e.g. parsed TOML/JSON).

        Raises:
            ConfigError: if ``data`` is not a mapping or any field is invalid.
        """
        if not isinstance(data, dict):
            raise ConfigError(f"{cls.__name__} = {data!r}: expected a table/dict of fields")
        return cls(**data)

    def to_dict(self) -> dict[str, Any]:
        """Plain-dict form (JSON/TOML-safe; None fields dropped)."""
        return self.model_dump(mode="json", exclude_none=True)

    def replace(self, **changes: Any) -> "Spec":
        """A validated copy with some fields changed."""
        return type(self)(**{**self.model_dump(), **changes})
