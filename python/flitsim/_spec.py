"""Base class of every user-facing spec: small, validated, immutable, and
round-trippable to dict/JSON/TOML. Validation errors surface as ConfigError."""

from __future__ import annotations

import numbers
import types
import typing
from typing import Any

from pydantic import BaseModel, ConfigDict, ValidationError, model_validator

from flitsim.errors import ConfigError, from_validation_error


def _strict_problem(annotation: Any, value: Any) -> str | None:
    """Why ``value`` may not stand for ``annotation`` although pydantic's lax
    mode would coerce it (None if it may). Strict at the boundary: a bool is
    not a number, a string is not a number, a float is not an integer."""
    origin = typing.get_origin(annotation)
    if origin is typing.Annotated:
        return _strict_problem(typing.get_args(annotation)[0], value)
    if origin in (typing.Union, types.UnionType):
        args = typing.get_args(annotation)
        if value is None and type(None) in args:
            return None
        problems = [_strict_problem(a, value) for a in args if a is not type(None)]
        return None if any(p is None for p in problems) else problems[0]
    if annotation is int:
        if isinstance(value, bool) or isinstance(value, (str, bytes)) or (
                isinstance(value, numbers.Real) and not isinstance(value, numbers.Integral)):
            return f"an integer (got {type(value).__name__})"
        return None
    if annotation is float:
        if isinstance(value, (bool, str, bytes)):
            return f"a number (got {type(value).__name__})"
        return None
    if annotation is bool:
        if type(value).__name__ not in ("bool", "bool_"):  # Python or numpy bool only
            return f"true or false (got {type(value).__name__})"
        return None
    if origin in (tuple, list) and isinstance(value, (list, tuple)):
        items = [a for a in typing.get_args(annotation) if a is not Ellipsis]
        if len(items) == 1:
            for i, v in enumerate(value):
                p = _strict_problem(items[0], v)
                if p:
                    return f"item {i} = {v!r}: {p}"
    return None


class Spec(BaseModel):
    """Frozen pydantic model; unknown keys are rejected.

    Raises:
        ConfigError: on any invalid field (wrong type, out of range, unknown
            key), naming the field path, the value and the rule.
    """

    # allow_inf_nan=False: a NaN or infinite float is refused by every spec ("a finite number"),
    # not compared against a bound (NaN failed `le` checks with a misleading "should be <= ...").
    model_config = ConfigDict(frozen=True, extra="forbid", validate_default=True, allow_inf_nan=False)

    @model_validator(mode="before")
    @classmethod
    def _strict_types(cls, data: Any) -> Any:
        # pydantic's lax mode turns True into 1 and "8" into 8; refuse those
        # for every spec at once rather than field by field.
        if isinstance(data, dict):
            for name, f in cls.model_fields.items():
                key = f.alias or name
                if key in data:
                    p = _strict_problem(f.annotation, data[key])
                    if p:
                        raise ConfigError(f"{name} = {data[key]!r}: expected {p}")
        return data

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
