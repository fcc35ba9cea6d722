"""Python values as the JSON the native module takes: ``set={...}`` overrides and tables."""

from __future__ import annotations

import json
import os
from typing import Any, Iterable, List, Mapping, Optional, Union

from . import _native

#: A file path: text or any ``os.PathLike``.
PathLike = Union[str, "os.PathLike[str]"]

#: What ``set=`` takes: a mapping of scenario keys to values, or ``--set`` strings as given on
#: the command line (``"policies=[\"srtf\"]"``).
Overrides = Union[Mapping[str, Any], Iterable[str], None]


def _plain(value: Any) -> Any:
    """NumPy scalars and arrays, paths and sets as JSON can carry them."""
    if isinstance(value, os.PathLike):
        return os.fspath(value)
    if hasattr(value, "tolist"):  # NumPy scalars and arrays, without importing NumPy
        return value.tolist()
    if isinstance(value, (set, frozenset)):
        return sorted(value)
    raise TypeError(f"{type(value).__name__} has no TOML form: {value!r}")


def to_json(value: Any) -> str:
    """``value`` as JSON (NaN and infinities refused: TOML has them, scenarios never mean them)."""
    return json.dumps(value, default=_plain, allow_nan=False)


def assignments(overrides: Overrides) -> List[str]:
    """``set=`` as ``--set KEY=VALUE`` assignments, each value written in TOML."""
    if overrides is None:
        return []
    if isinstance(overrides, str):
        raise TypeError('set= takes a dict ({"policies": ["srtf"]}) or a list of "KEY=VALUE" strings, not a string')
    if isinstance(overrides, Mapping):
        return [_native.assignment(str(key), to_json(value)) for key, value in overrides.items()]
    return [str(assignment) for assignment in overrides]


def optional_path(path: Optional[PathLike]) -> Optional[str]:
    return None if path is None else os.fspath(path)
