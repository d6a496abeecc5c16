"""Reading an engine's raw per-request meta object: scalar fields and the speculation columns.

Engines report their per-request facts in JSON of their own shape (SGLang's `meta_info`, vLLM's
`metrics`); each adapter reads its own shape with these helpers and hands back the same columns,
so the metrics never need to know which engine wrote a record. Anything missing is NaN.
"""

from __future__ import annotations

import math
from typing import Any

# The speculation facts every adapter's reader returns, one per request (docs/metrics.md).
SPEC_COLUMNS = ("accept_length", "verify_rounds", "accepted_draft_tokens", "proposed_draft_tokens",
                "accept_rate")
# A request without speculation: NaN everywhere, never 1.0 or 0 ("no drafts" is not "drafts that
# were all rejected").
NO_SPECULATION = dict.fromkeys(SPEC_COLUMNS, math.nan)


def lookup(meta: Any, *path: str) -> Any:
    """`meta[path[0]][path[1]]...`, or None where any level is missing or not an object."""
    for key in path:
        if not isinstance(meta, dict):
            return None
        meta = meta.get(key)
    return meta


def number(value: Any) -> float:
    """A JSON scalar as float; NaN for None, text, booleans and anything else not a number."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return math.nan
    return float(value)


def first_number(meta: dict[str, Any], *names: str) -> float:
    """The first of `names` that holds a number in `meta` (newer field names first); else NaN."""
    for name in names:
        value = number(meta.get(name))
        if not math.isnan(value):
            return value
    return math.nan


def speculation_columns(accept_length: float, rounds: float, accepted: float, proposed: float,
                        reported_rate: float) -> dict[str, float]:
    """The SPEC_COLUMNS of one request; accept_rate = accepted / proposed, else the server's rate.
    A rate above 1 (more accepted than drafted: the record names it, `impossible_count`) is NaN."""
    rate = accepted / proposed if proposed > 0 else reported_rate
    if rate > 1:
        rate = math.nan
    return {"accept_length": accept_length, "verify_rounds": rounds, "accepted_draft_tokens": accepted,
            "proposed_draft_tokens": proposed, "accept_rate": rate}


def count_list(value: Any) -> list[int] | None:
    """A JSON list of non-negative whole counts as ints; None for anything else (absent, text, a
    negative or fractional entry): a malformed histogram is not read as a short one."""
    if not isinstance(value, list) or not value:
        return None
    counts = [number(entry) for entry in value]
    if not all(c >= 0 and c == int(c) for c in counts):  # NaN fails both comparisons
        return None
    return [int(c) for c in counts]
