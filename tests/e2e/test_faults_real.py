"""Issue 53's fault promises (docs/faults.md) against a real llama.cpp server: the recording proxy
(tests/e2e/proxy.py) rewrites the server's own stream to plant one fault, `sparkbench run` records
it, and every run folder still reads back with `sparkbench summarize`.

Each run is two short requests without a warm-up, so the first POST is the first measured request:
one to carry the fault, one to show the run goes on. Nothing here is timed.
"""

from __future__ import annotations

import json
import math
import secrets
import string
from pathlib import Path
from typing import Any

import pandas as pd
import pytest

from harness.engines.base import MAX_ERROR_CHARS
from tests.e2e.conftest import LiveServer, only_run_dir, sparkbench, synthetic_args
from tests.e2e.proxy import ChunkEdit, Rewriting, edit_chunks, nth_post, recording_proxy, split_data

PROMPTS, INPUT, OUTPUT = 2, 16, 8
SECRET_WINDOW = 8  # the shortest part of a secret that the redaction promises to mask


def _run(server: LiveServer, results: Path, rewriting: Rewriting, *extra: str) -> Path:
    """`sparkbench run synthetic` through the proxy; the run folder, once `sparkbench summarize` read it."""
    with recording_proxy(server.base_url, rewriting=rewriting) as (url, _):
        proxied = LiveServer(url, server.model_dir)
        done = sparkbench(*synthetic_args(proxied, results, PROMPTS, INPUT, OUTPUT, "--warmup", "0", *extra))
    assert done.returncode == 0, done.stderr
    run_dir = only_run_dir(results)
    summarized = sparkbench("summarize", str(run_dir))
    assert summarized.returncode == 0, summarized.stderr
    return run_dir


def _first_faulted(edit: ChunkEdit) -> Rewriting:
    return nth_post(0, edit_chunks(edit))


def _records(run_dir: Path) -> list[dict[str, Any]]:
    lines = (run_dir / "requests.jsonl").read_text(encoding="utf-8").splitlines()
    return sorted((json.loads(line) for line in lines), key=lambda record: record["seq"])


def _last_chunk(edit):
    """`edit` applied to llama.cpp's last chunk (`stop: true`, with the counts and `timings`)."""
    return lambda chunk, _index, _headers: edit(chunk) if chunk.get("stop") else chunk


def _timings(chunk: dict[str, Any], **changed: int) -> dict[str, Any]:
    return {**chunk, "timings": {**chunk["timings"], **changed}}


WRONG_TYPES = {
    "llama.cpp content a number": ("llamacpp", lambda chunk, _i, _h: {**chunk, "content": 5},
                                   "the chunk's content is a number, not text"),
    "openai choices [null]": ("openai", lambda chunk, _i, _h: {**chunk, "choices": [None]},
                              "the chunk's choices[0] is"),
    "openai usage as text": ("openai", lambda chunk, _i, _h: {**chunk, "usage": "x"} if "usage" in chunk else chunk,
                             "the chunk's usage is text, not an object"),
}


@pytest.mark.parametrize("case", WRONG_TYPES)
def test_a_wrong_typed_field_is_a_malformed_chunk_naming_it_and_the_run_goes_on(llamacpp_server, tmp_path, case):
    api, edit, named = WRONG_TYPES[case]
    faulted, other = _records(_run(llamacpp_server, tmp_path, _first_faulted(edit), "--backend", api))
    assert (faulted["error_kind"], other["status"]) == ("malformed_chunk", "ok"), faulted["error_message"]
    assert named in faulted["error_message"]


CONTRADICTIONS = {
    "cached above prompt": (lambda chunk: _timings(chunk, cache_n=chunk["tokens_evaluated"] + 600),
                            "cached tokens of"),
    "final count below the streamed": (lambda chunk: {**chunk, "tokens_predicted": 1},
                                       "final count of 1 completion tokens is below the"),
    # Fewer accepted than the OUTPUT - 1 decode steps could have taken: only the drafts contradict.
    "accepted above drafted": (lambda chunk: _timings(chunk, draft_n=2, draft_n_accepted=5),
                               "5 accepted draft tokens of 2 drafted"),
}
RATES = ("prefix_cache_hit_rate", "accept_rate")  # shares of the ok requests' counts: never above 1


@pytest.mark.parametrize("case", CONTRADICTIONS)
def test_counts_that_contradict_are_named_and_give_no_impossible_figure(llamacpp_server, tmp_path, case):
    edit, named = CONTRADICTIONS[case]
    run_dir = _run(llamacpp_server, tmp_path, _first_faulted(_last_chunk(edit)))
    faulted, other = _records(run_dir)
    assert (faulted["error_kind"], other["status"]) == ("impossible_count", "ok"), faulted["error_message"]
    assert named in faulted["error_message"]
    summary = pd.read_csv(run_dir / "summary.csv")
    rates = summary[summary["metric"].isin(RATES)]
    assert set(rates["metric"]) == set(RATES)
    assert all(math.isnan(value) or 0 <= value <= 1 for value in rates["value"]), rates


def _counts_apart_from_text(chunk: dict[str, Any], index: int, _headers: dict[str, str]) -> dict[str, Any]:
    """An OpenAI stream whose text chunks are usage-only chunks carrying the running count (a server
    that streams counts apart from text); the closing chunk, with the final usage, as sent."""
    if "usage" in chunk:
        return chunk
    return {**chunk, "choices": [], "usage": {"completion_tokens": index + 1}}


def test_a_usage_only_chunk_that_advances_the_count_is_a_token_arrival(llamacpp_server, tmp_path):
    run_dir = _run(llamacpp_server, tmp_path, edit_chunks(_counts_apart_from_text), "--backend", "openai")
    for record in _records(run_dir):
        assert record["status"] == "ok", record["error_message"]
        assert record["output_text"] == ""  # no text came: the arrivals are the counts
        assert record["first_token_ns"] is not None and len(record["chunk_ns"]) > 1
        assert record["chunk_tokens"][-1] == OUTPUT == record["completion_tokens"]
    summary = pd.read_csv(run_dir / "summary.csv").set_index(["metric", "stat"])["value"]
    assert summary[("ttft_ms", "p50")] > 0 and summary[("tpot_ms", "p50")] > 0


def _echo_credential(chunk: dict[str, Any], _index: int, headers: dict[str, str]) -> dict[str, Any]:
    """The bearer token sent, echoed in the text of every chunk, and then in a mid-stream error in
    place of the last chunk, placed across where the client cuts an error message."""
    token = headers["authorization"].removeprefix("Bearer ")
    if chunk.get("stop"):
        return {"error": {"message": "x" * (MAX_ERROR_CHARS - len(token) // 2) + token}}
    return {**chunk, "content": f"{chunk['content']} invalid token {token}"}


def _secret_windows(secret: str) -> set[bytes]:
    return {secret[i:i + SECRET_WINDOW].encode() for i in range(len(secret) - SECRET_WINDOW + 1)}


def _held_secret(run_dir: Path, secret: str) -> list[str]:
    """The files of `run_dir` holding any part of `secret` long enough to be masked: in their bytes,
    and in each Parquet table's values (which a compressed page would hide from the bytes)."""
    windows, held = _secret_windows(secret), []
    for path in sorted(p for p in run_dir.rglob("*") if p.is_file()):
        texts = [path.read_bytes()]
        if path.suffix == ".parquet":
            texts.append(pd.read_parquet(path).to_json().encode())
        if any(window in text for window in windows for text in texts):
            held.append(str(path.relative_to(run_dir)))
    return held


def test_a_server_echoing_the_credential_leaves_no_part_of_it_in_the_run_folder(llamacpp_server, tmp_path):
    secret = "sk-" + "".join(secrets.choice(string.ascii_letters) for _ in range(40))
    run_dir = _run(llamacpp_server, tmp_path, _first_faulted(_echo_credential), "--api-key", secret)
    faulted, other = _records(run_dir)
    assert (faulted["error_kind"], other["status"]) == ("http_status", "ok")
    assert "invalid token ***" in faulted["output_text"] and "***" in faulted["error_message"]  # it was echoed
    assert _held_secret(run_dir, secret) == []


def test_a_data_field_split_over_two_lines_is_one_event(llamacpp_server, tmp_path):
    records = _records(_run(llamacpp_server, tmp_path, split_data))
    assert [(record["status"], record["completion_tokens"]) for record in records] == [("ok", OUTPUT)] * PROMPTS
