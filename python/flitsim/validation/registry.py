"""The registry: every validation case, collected from the area modules.

Each module in ``flitsim/validation/cases/`` defines ``CASES``, a sequence of
:class:`~flitsim.validation.Case`; every such module is found by name at load
time (``pkgutil``), so adding an area is adding one file, and adding a case is
one entry in its area's file. Packages outside flitsim can add theirs through
the ``flitsim.validation`` entry-point group (each entry point names a module
with ``CASES``). Ids are unique across all modules."""

from __future__ import annotations

import importlib
import pkgutil
from functools import lru_cache
from typing import Iterable

from flitsim.errors import ConfigError
from flitsim.validation.case import TAGS, Case

ENTRY_POINT_GROUP = "flitsim.validation"


def _area_modules() -> list[str]:
    from flitsim.validation import cases as pkg

    names = [f"{pkg.__name__}.{m.name}" for m in pkgutil.iter_modules(pkg.__path__) if not m.name.startswith("_")]
    try:
        from importlib.metadata import entry_points

        names += [ep.value for ep in entry_points(group=ENTRY_POINT_GROUP)]
    except Exception:  # no metadata (source checkout): the package's own areas only
        pass
    return sorted(names)


@lru_cache(maxsize=1)
def _load() -> tuple[Case, ...]:
    out: list[Case] = []
    seen: dict[str, str] = {}
    for name in _area_modules():
        mod = importlib.import_module(name)
        got = getattr(mod, "CASES", None)
        if got is None:
            raise ConfigError(f"validation module {name!r}: defines no CASES")
        for c in got:
            if not isinstance(c, Case):
                raise ConfigError(f"validation module {name!r}: CASES holds {type(c).__name__}, not a Case")
            if c.id in seen:
                raise ConfigError(f"validation case id {c.id!r} is defined twice ({seen[c.id]} and {name})")
            seen[c.id] = name
            out.append(c)
    return tuple(out)


def all_cases() -> tuple[Case, ...]:
    """Every registered case, in module order, then file order."""
    return _load()


def get_case(case_id: str) -> Case:
    """The case named ``case_id``.

    Raises:
        ConfigError: unknown id (the message lists the areas and how to list ids).
    """
    for c in _load():
        if c.id == case_id:
            return c
    areas = sorted({c.area for c in _load()})
    raise ConfigError(f"case = {case_id!r}: no such validation case (areas: {', '.join(areas)}; "
                      "`flitsim validate --list` prints every id)")


def select(case_ids: Iterable[str] = (), tags: Iterable[str] = (), areas: Iterable[str] = (),
           fast: bool = False) -> list[Case]:
    """The cases matching every filter given (ids: exact ids or an area prefix
    ending in ``.``/``*``; tags; areas; ``fast``: the CI subset only).

    Raises:
        ConfigError: an unknown tag, area or case id.
    """
    cases = list(_load())
    tags, areas, case_ids = list(tags), list(areas), list(case_ids)
    for t in tags:
        if t not in TAGS:
            raise ConfigError(f"tag = {t!r}: expected one of {list(TAGS)}")
    known_areas = sorted({c.area for c in cases})
    for a in areas:
        if a not in known_areas:
            raise ConfigError(f"area = {a!r}: expected one of {known_areas}")
    if case_ids:
        chosen: list[Case] = []
        for cid in case_ids:
            if cid.endswith(("*", ".")):
                pre = cid.rstrip("*")
                hit = [c for c in cases if c.id.startswith(pre)]
                if not hit:
                    raise ConfigError(f"case = {cid!r}: no validation case id starts with {pre!r}")
                chosen += hit
            else:
                chosen.append(get_case(cid))
        cases = list(dict.fromkeys(chosen))
    if tags:
        cases = [c for c in cases if c.tag in tags]
    if areas:
        cases = [c for c in cases if c.area in areas]
    if fast:
        cases = [c for c in cases if c.fast]
    return cases
