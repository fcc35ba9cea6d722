"""Tables from the native module (JSON rows, CSV) into DataFrames: the one place that knows the
container — pandas, or polars after ``arbiter.set_frames("polars")`` — imported on first use so
that ``import arbiter`` stays quick."""

from __future__ import annotations

import io
import json
from typing import TYPE_CHECKING, Any, Dict, List, Tuple

if TYPE_CHECKING:
    import pandas as pd


#: The DataFrame library tables come in: ``"pandas"`` (the default) or ``"polars"``.
_library = "pandas"

LIBRARIES = ("pandas", "polars")


def set_frames(library: str) -> None:
    """Makes the tables that come after — :attr:`Run.results`, :attr:`Run.published`,
    :attr:`Run.jobs` (each as of its first read), :func:`read_trace`, :func:`policies` and the
    tables of :func:`analyze_trace` — ``pandas`` DataFrames (the default) or ``polars`` ones
    (``pip install "./python[polars]"``; the per-hour and per-class shares of a trace analysis
    stay pandas Series). Raises ``ValueError`` for another name and ``ImportError`` if the
    library is not installed."""
    global _library
    if library not in LIBRARIES:
        raise ValueError(f"unknown DataFrame library {library!r}; expected one of {', '.join(map(repr, LIBRARIES))}")
    if library == "polars":
        import polars  # noqa: F401  (fail here, not at the first table)
    _library = library


def frames() -> str:
    """The DataFrame library tables come in (see :func:`set_frames`)."""
    return _library


def rows(text: str) -> Any:
    """A JSON list of objects (``arbiter run --json``'s rows) as a DataFrame, columns in the
    objects' order."""
    return records(json.loads(text))


def records(items: List[Dict[str, Any]]) -> Any:
    """Already-decoded rows as a DataFrame."""
    if _library == "polars":
        import polars as pl

        # Every row's keys, in first-seen order (rows may leave optional keys out).
        columns: Dict[str, None] = {}
        for item in items:
            columns.update(dict.fromkeys(item))
        return pl.DataFrame([{c: item.get(c) for c in columns} for item in items], infer_schema_length=None)
    import pandas as pd

    return pd.DataFrame(items)


def series(values: Any, name: str, index: Any = None) -> "pd.Series":
    """A list or a mapping as a named Series."""
    import pandas as pd

    return pd.Series(values, name=name, index=index)


#: Native trace columns that hold text, kept as text (an id such as ``007`` is not a number).
TRACE_TEXT_COLUMNS = ("trace_id", "tenant", "user", "name", "model", "deadline_options")

#: Per-job columns that hold text.
JOBS_TEXT_COLUMNS = ("trace", "policy", "trace_id", "tenant", "outcome", "last_wait_reason")


def csv(text: str, text_columns: Tuple[str, ...]) -> "pd.DataFrame":
    """CSV as a DataFrame: ``text_columns`` stay text, empty cells are missing values, and only
    they (a tenant named ``NA`` stays ``"NA"``); a column with no value at all is float NaN
    (polars: null)."""
    if _library == "polars":
        import polars as pl

        header = text.split("\n", 1)[0].split(",")
        return pl.read_csv(
            io.StringIO(text),
            schema_overrides={c: pl.Utf8 for c in text_columns if c in header},
            null_values=[""],
            infer_schema_length=None,
        )
    import pandas as pd

    return pd.read_csv(
        io.StringIO(text),
        dtype={c: "object" for c in text_columns},
        keep_default_na=False,
        na_values=[""],
    )
