"""The client's latency columns on the cases the mutation run (docs/testing.md) found unchecked:
sub-millisecond gaps, gap and token lists of different lengths, a failed request's ITL, a frame
without a status column."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from harness.metrics.latency import chunk_gaps_ms, client_columns, itl_ms

MS = 1_000_000  # ns


def test_a_gap_keeps_its_fraction_of_a_millisecond():
    assert chunk_gaps_ms([0, 1_500_000, 1_750_000]) == [1.5, 0.25]


@pytest.mark.parametrize(("gaps", "tokens"), [([10.0], [1, 1]), ([10.0, 10.0], [1])])
def test_gaps_and_token_counts_of_different_lengths_give_no_itl(gaps, tokens):
    assert itl_ms(gaps, tokens) == []


def _frame(statuses: list[str] | None) -> tuple[pd.DataFrame, list[dict]]:
    rows = len(statuses or ["ok", "ok"])
    frame = pd.DataFrame({
        "completion_tokens": [4] * rows,
        "sent_ns": [0] * rows,
        "first_token_ns": [10 * MS] * rows,
        "end_ns": [41 * MS] * rows,
        "chunk_ns": [np.array([10 * MS, 20 * MS, 40 * MS])] * rows,
        "chunk_tokens": [np.array([1, 2, 4])] * rows,
    })
    if statuses is not None:
        frame["status"] = statuses
    return frame, [{}] * rows


def test_a_failed_request_has_no_itl_and_a_frame_without_status_counts_every_request_as_ok():
    frame, metas = _frame(["ok", "error"])
    columns = client_columns(frame, metas)
    assert columns["itl_ms"] == [[10.0, 10.0, 10.0], []]
    assert columns["chunk_gaps_ms"] == [[10.0, 20.0], [10.0, 20.0]]  # the gaps themselves stay
    frame, metas = _frame(None)
    assert client_columns(frame, metas)["itl_ms"] == [[10.0, 10.0, 10.0]] * 2


def test_a_long_stream_keeps_its_itl():
    """300 gaps: lengths past the integers Python keeps one object for still compare equal."""
    assert itl_ms([2.0] * 300, [2] * 300) == [1.0] * 600
