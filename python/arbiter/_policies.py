"""The policies and their descriptors."""

from __future__ import annotations

import json
from typing import TYPE_CHECKING

from . import _frames, _native

if TYPE_CHECKING:
    import pandas as pd


def policies() -> "pd.DataFrame":
    """Every policy, one row each in ``arbiter policies`` order, with its descriptor as
    ``arbiter policies --json`` prints it: ``name``, ``aliases`` (a list), ``describe`` (one
    line), ``family`` (``events``, ``gavel-allocation``, ``synergy``, ``other-rounds``),
    ``pair_speeds``, ``elastic``, ``daemon`` (``runs``, ``needs-colocation``, ``refused``),
    ``daemon_refused_because`` (missing unless refused), ``fairness_columns``, ``paper`` and
    ``detail`` (Markdown)."""
    return _frames.records(json.loads(_native.policies()))
