"""Tidy frames as plain JSON and back: how ``analysis.json`` keeps a table (a leaf of the analysis)."""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import pandas as pd


def jsonable(value: Any) -> Any:
    """Plain JSON types: numpy scalars -> Python, NA/NaT/NaN/inf -> None (strict JSON: ``null``, which
    every parser reads), tuples -> lists."""
    if isinstance(value, dict):
        return {str(k): jsonable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [jsonable(v) for v in value]
    if isinstance(value, np.ndarray):
        return [jsonable(v) for v in value.tolist()]
    if isinstance(value, np.generic):
        value = value.item()
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if value is pd.NA or value is pd.NaT:
        return None
    if isinstance(value, pd.Timestamp):
        return value.isoformat()
    return value


def frame_json(frame: pd.DataFrame) -> dict:
    return {"columns": [str(c) for c in frame.columns], "records": jsonable(frame.to_dict("records"))}


def json_frame(data: dict) -> pd.DataFrame:
    """The frame back from ``frame_json``: a numeric column's nulls (NaN when written) are NaN again."""
    frame = pd.DataFrame(data.get("records", []), columns=data.get("columns"))
    for column in frame.columns:
        values = frame[column]
        if values.dtype == object and values.isna().any() and all(
                isinstance(v, (int, float)) and not isinstance(v, bool) for v in values.dropna()):
            frame[column] = values.astype(float)
    return frame
