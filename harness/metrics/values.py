"""Reading raw record values: JSON meta objects, nanosecond stamps, counts that may be missing.

Records come from JSONL (lists, None, sometimes floats) or Parquet (numpy arrays, nullable Int64),
so every reader here accepts both and turns anything missing into NaN instead of raising.
"""

from __future__ import annotations

import json
import math
from typing import Any

import numpy as np
import pandas as pd

from harness.errors import SparkbenchError

NS_PER_MS = 1_000_000


def parse_meta(raw: object) -> dict[str, Any]:
    """The request's final meta object (`meta_info_json`); empty when the record holds none."""
    if not isinstance(raw, str) or not raw.strip():
        return {}
    try:
        meta = json.loads(raw)
    except json.JSONDecodeError as exc:
        raise SparkbenchError(f"meta_info_json is not valid JSON: {raw[:80]!r}") from exc
    return meta if isinstance(meta, dict) else {}


def int_array(value: Any) -> np.ndarray:
    """A list column cell (list, numpy array, or missing) as an int64 array."""
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return np.empty(0, dtype=np.int64)
    return np.asarray(value, dtype=np.int64)


def floats(column: pd.Series) -> np.ndarray:
    """A numeric column (int, float, nullable Int64 or object with None) as float64, NaN where missing."""
    return pd.to_numeric(column, errors="coerce").to_numpy(dtype=float, na_value=np.nan)


def elapsed_ms(later: pd.Series, earlier: pd.Series) -> np.ndarray:
    """`(later - earlier) / 1e6`: ms between two ns stamp columns, NaN where either is missing.

    The subtraction is done on integers: perf_counter_ns readings pass 2**53 after about 104 days
    of uptime, where float64 would start rounding them.
    """
    delta = later.astype("Int64") - earlier.astype("Int64")
    return delta.to_numpy(dtype=float, na_value=np.nan) / NS_PER_MS


def ratio(numerator: np.ndarray, denominator: np.ndarray) -> np.ndarray:
    """`numerator / denominator` elementwise, NaN wherever the denominator is not > 0 (or is NaN)."""
    numerator, denominator = np.broadcast_arrays(np.asarray(numerator, float), np.asarray(denominator, float))
    out = np.full(numerator.shape, np.nan)
    np.divide(numerator, denominator, out=out, where=denominator > 0)
    return out
