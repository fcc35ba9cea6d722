"""Tables from the native module (JSON rows, CSV) into DataFrames: the one place that knows the
container (pandas), imported on first use so that ``import arbiter`` stays quick."""

from __future__ import annotations

import io
import json
from typing import TYPE_CHECKING, Any, Dict, List, Tuple

if TYPE_CHECKING:
    import pandas as pd


def rows(text: str) -> "pd.DataFrame":
    """A JSON list of objects (``arbiter run --json``'s rows) as a DataFrame, columns in the
    objects' order."""
    import pandas as pd

    return pd.DataFrame(json.loads(text))


def records(items: List[Dict[str, Any]]) -> "pd.DataFrame":
    """Already-decoded rows as a DataFrame."""
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
    they (a tenant named ``NA`` stays ``"NA"``); a column with no value at all is float NaN."""
    import pandas as pd

    return pd.read_csv(
        io.StringIO(text),
        dtype={c: "object" for c in text_columns},
        keep_default_na=False,
        na_values=[""],
    )
