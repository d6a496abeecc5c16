"""A stop signal is answered while the record writer is busy with a record of megabytes (a server
that sends a huge field): redacting its texts, or writing it to a disk that stalls. The run stops
`interrupted`, the record being written is whole, and the records before it are intact."""

from __future__ import annotations

import json
import os
import signal
import threading
from dataclasses import dataclass, field

import pytest

import harness.records.requests as records_module
import harness.run.runner as runner_module
from harness.records.requests import JSONL_NAME, json_lines, load_requests
from harness.run.pool import Pool
from harness.run.runner import RunAborted
from tests.fakes.broken_server import HUGE_FIELD_CHARS, HUGE_WORD, Breakage, breaking
from tests.unit.test_fault_tolerance import run_against

# What the writer does when the huge record reaches it: its texts redacted, or its line written.
STAGES = ("redact", "write_at")
# Only a safety net: a writer that holds the event loop never sees the signal answered and goes
# on after this long, so the order of events fails instead of the test hanging.
WAIT_S = 10.0


@dataclass
class Watch:
    """The order of events, and the first signal's answer (the pool's stop) as it happens."""

    events: list[str] = field(default_factory=list)
    answered: threading.Event = field(default_factory=threading.Event)


@pytest.fixture
def watch(monkeypatch) -> Watch:
    seen = Watch()
    stop = Pool.stop

    def recorded_stop(pool, reason):
        if reason.startswith("stop asked"):
            seen.events.append("signal answered")
            seen.answered.set()
        stop(pool, reason)

    monkeypatch.setattr(Pool, "stop", recorded_stop)
    return seen


def stall(monkeypatch, stage: str, watch: Watch, until: threading.Event, signals: int = 1) -> None:
    """The writer's `stage` (a function of `harness.records.requests`) sends SIGTERM to this process
    when the huge record reaches it (`signals` times, each after the one before was answered), then
    stalls until `until` is set."""
    real = getattr(records_module, stage)

    def stalled(*args):
        huge = any(isinstance(arg, (str, bytes)) and len(arg) >= HUGE_FIELD_CHARS for arg in args)
        if huge and "writer busy" not in watch.events:
            watch.events.append("writer busy")
            os.kill(os.getpid(), signal.SIGTERM)
            for _ in range(signals - 1):
                watch.answered.wait(WAIT_S)
                os.kill(os.getpid(), signal.SIGTERM)
            until.wait(WAIT_S)
            watch.events.append("writer done")
        return real(*args)

    monkeypatch.setattr(records_module, stage, stalled)


def whole_records(run_path) -> list[str]:
    """The prompt ids of the records, each line parsed, the huge record's field whole."""
    raw = (run_path / JSONL_NAME).read_bytes()
    lines = json_lines(run_path / JSONL_NAME)
    assert raw.endswith(b"\n") and len(lines) == len(raw.splitlines())
    assert [line["prompt_id"] for line in lines if HUGE_WORD in line["meta_info_json"]] == ["p1"]
    return [line["prompt_id"] for line in lines]


@pytest.mark.parametrize("client", ["sglang", "openai"])
@pytest.mark.parametrize("stage", STAGES)
def test_the_first_signal_is_answered_while_the_writer_is_busy(stage, client, watch, tmp_path, monkeypatch):
    stall(monkeypatch, stage, watch, until=watch.answered)
    with breaking(Breakage("huge_field", frozenset({1}))) as url, \
            pytest.raises(RunAborted, match=r"run interrupted after 2 of 4 .*stop asked \(SIGTERM\)"):
        run_against(url, client, tmp_path)
    assert watch.events == ["writer busy", "signal answered", "writer done"]
    run_path = tmp_path / f"run-{client}"
    manifest = json.loads((run_path / "manifest.json").read_text())
    assert manifest["status"] == "interrupted" and "stop asked (SIGTERM)" in manifest["error"]
    assert manifest["requests_recorded"] == 2 and whole_records(run_path) == ["p0", "p1"]
    assert load_requests(run_path)["status"].tolist() == ["ok", "ok"]  # the Parquet table holds both


@pytest.mark.parametrize("stage", STAGES)
def test_a_second_signal_abandons_the_run_and_the_record_being_written_stays_whole(stage, watch, tmp_path,
                                                                                   monkeypatch):
    ending = threading.Event()
    close = runner_module._Progress.close

    def end(progress):  # the first thing the run's end does, once the second signal abandoned it
        watch.events.append("run ending")
        ending.set()
        close(progress)

    monkeypatch.setattr(runner_module._Progress, "close", end)
    stall(monkeypatch, stage, watch, until=ending, signals=2)
    with breaking(Breakage("huge_field", frozenset({1}))) as url, pytest.raises(RunAborted, match="Ctrl-C"):
        run_against(url, "sglang", tmp_path)
    assert watch.events == ["writer busy", "signal answered", "run ending", "writer done"]
    run_path = tmp_path / "run-sglang"
    manifest = json.loads((run_path / "manifest.json").read_text())
    assert manifest["status"] == "interrupted" and manifest["requests_recorded"] == 2
    assert whole_records(run_path) == ["p0", "p1"]
