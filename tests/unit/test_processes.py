"""Load from several client processes: the streams split between them, every record written by the
parent, and every worker's stamps moved onto the parent's clock through wall-clock anchors."""

from __future__ import annotations

import json
import time

from harness.engines.base import StreamResult
from harness.engines.sglang import SGLangBackend
from harness.records.requests import load_requests
from harness.records.rundir import RunDir
from harness.run.processes import clock_offset, concurrency_share, shifted
from harness.run.runner import RunOptions, execute
from tests.fakes.stream_server import Script, serving
from tests.unit.test_fault_tolerance import TOKENS, FixedLength


def test_a_worker_stamp_lands_where_its_wall_clock_says():
    parent = {"wall_ns": 1_000_000_000_000, "mono_ns": 50_000}
    worker = {"wall_ns": 1_000_000_000_300, "mono_ns": 9_000_000}  # started 300 ns later, another clock
    offset = clock_offset(parent, worker)
    assert worker["mono_ns"] + offset == parent["mono_ns"] + 300
    result = StreamResult(sent_unix_s=0.0, sent_ns=9_000_100, end_ns=9_000_900, first_token_ns=9_000_400,
                          last_token_ns=9_000_800, chunk_ns=[9_000_400, 9_000_800])
    moved = shifted(result, offset)
    assert moved.sent_ns == parent["mono_ns"] + 400
    assert moved.end_ns - moved.sent_ns == 800 and moved.chunk_ns == [n + offset for n in result.chunk_ns]
    assert moved.first_token_ns - moved.sent_ns == 300  # durations unchanged


def test_concurrency_is_shared_as_evenly_as_it_goes():
    assert [concurrency_share(5, 2, i) for i in range(2)] == [3, 2]
    assert sum(concurrency_share(16, 3, i) for i in range(3)) == 16


def test_two_processes_record_every_request_on_the_parents_clock(tmp_path):
    run = RunDir.create(tmp_path, "run-processes", {"workload": {"name": "synthetic"}})
    options = RunOptions(base_url="", warmup=0, show_progress=False, power_sample_ms=0, concurrency=4,
                         processes=2)
    with serving(Script(api="sglang", step_s=0.002)) as url:
        before = time.perf_counter_ns()
        execute(SGLangBackend(), options.model_copy(update={"base_url": url}), FixedLength(8), run)
        after = time.perf_counter_ns()
    table = load_requests(run.path)
    assert sorted(table["prompt_id"]) == [f"p{i}" for i in range(8)]
    assert (table["status"] == "ok").all() and (table["completion_tokens"] == TOKENS).all()
    manifest = json.loads((run.path / "manifest.json").read_text())
    clocks = manifest["client_processes"]
    assert [c["role"] for c in clocks] == ["parent", "worker 0", "worker 1"]
    assert len({c["pid"] for c in clocks}) == 3
    assert manifest["client_load"]["chunks"] == 8 * TOKENS
    assert table["sent_ns"].between(before, after).all() and table["end_ns"].between(before, after).all()
