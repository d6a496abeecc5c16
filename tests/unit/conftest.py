"""Fixtures for unit tests: request records built from made-up timestamps."""

from __future__ import annotations

import json
from dataclasses import asdict
from typing import Any

import pandas as pd
import pytest

from harness.metrics import derive_requests
from harness.records.requests import COLUMNS, RequestRecord

# A perf_counter_ns reading after ~58 days of uptime: stamps this large catch float rounding.
BASE_NS = 5 * 10**15


def ns_at(ms: float) -> int:
    """The perf_counter_ns stamp `ms` milliseconds after BASE_NS."""
    return BASE_NS + round(ms * 1_000_000)


def build_record(
    *,
    chunks: list[tuple[float, int]] = ((100.0, 1),),
    sent_ms: float = 0.0,
    end_ms: float | None = None,
    completion_tokens: int | None | str = "from chunks",
    prompt_tokens: int | None = 16,
    engine: str = "sglang",
    meta: dict[str, Any] | None = None,
    meta_json: str | None = None,
    texts: list[str] | None = None,
    seq: int = 0,
    stalls: list[tuple[float, float]] | None = None,
) -> RequestRecord:
    """One record. `chunks` holds (arrival ms after BASE_NS, new tokens) per token-bearing chunk;
    `end_ms` ([DONE]) defaults to 1 ms after the last chunk. `meta` is merged into a minimal meta
    object of the engine's shape (SGLang meta_info, else OpenAI usage); `meta_json` replaces the stored JSON outright.
    `stalls`: (ms after BASE_NS the client's loop woke, ms late) each; None: not probed."""
    arrivals = [ns_at(ms) for ms, _ in chunks]
    counts = [sum(new for _, new in chunks[: i + 1]) for i in range(len(chunks))]
    total = counts[-1] if counts else 0
    completion = total if completion_tokens == "from chunks" else completion_tokens
    if engine == "sglang":
        base: dict[str, Any] = {"completion_tokens": completion, "prompt_tokens": prompt_tokens}
    else:
        base = {"usage": {"completion_tokens": completion, "prompt_tokens": prompt_tokens}}
    last_ms = chunks[-1][0] if chunks else sent_ms
    return RequestRecord(
        run_id="run-test", seq=seq, prompt_id=f"p{seq}", workload="synthetic", engine=engine,
        api="sglang" if engine == "sglang" else "openai",
        prompt_tokens=prompt_tokens, completion_tokens=completion, cached_tokens=0,
        finish_reason="length", stream_mode="cumulative", sent_unix_s=1.7e9,
        sent_ns=ns_at(sent_ms), first_token_ns=arrivals[0] if arrivals else None,
        last_token_ns=arrivals[-1] if arrivals else None,
        end_ns=ns_at(end_ms if end_ms is not None else last_ms + 1.0),
        chunk_ns=arrivals, chunk_tokens=counts,
        stall_ns=None if stalls is None else [ns_at(ms) for ms, _ in stalls],
        stall_late_ns=None if stalls is None else [round(late * 1e6) for _, late in stalls],
        output_text="".join(texts) if texts is not None else "x" * total,
        meta_info_json=json.dumps(base | (meta or {}), sort_keys=True) if meta_json is None else meta_json,
    )


def to_frame(records: list[RequestRecord]) -> pd.DataFrame:
    """The request table load_requests would return for these records (JSONL shape)."""
    return pd.DataFrame([asdict(r) for r in records], columns=COLUMNS)


@pytest.fixture(scope="session")
def make_record():
    """Factory: `make_record(chunks=[(ms, new_tokens), ...], ...)` -> RequestRecord."""
    return build_record


@pytest.fixture(scope="session")
def frame_of():
    """Factory: `frame_of(records)` -> per-request DataFrame."""
    return to_frame


@pytest.fixture
def derive_one(make_record, frame_of):
    """Derived row of a single record built from the factory's arguments."""
    def derive(**kwargs) -> pd.Series:
        return derive_requests(frame_of([make_record(**kwargs)])).iloc[0]
    return derive
