"""The runner with a scripted backend: warm-up not recorded, durability, how each stop is classified."""

from __future__ import annotations

import asyncio
import json
import os
import signal

import pytest

from harness.engines.base import ConnectFailed, MalformedStream, RequestFailed, ServerHTTPError, StreamResult
from harness.errors import SparkbenchError
from harness.power.sampler import load_power_samples
from harness.power.sensors import SensorInfo
from harness.records.requests import load_requests
from harness.records.rundir import RunDir
from harness.run.runner import RunAborted, RunOptions, execute
from harness.spec import Prompt, SamplingParams


class ScriptedBackend:
    """Answers each prompt with a fixed result, or raises what the script says for that prompt."""

    name = "sglang"
    engine = "sglang"

    def __init__(self, failures: dict[str, BaseException] | None = None) -> None:
        self.failures = failures or {}
        self.sent: list[str] = []

    async def send(self, http, base_url, prompt, deadlines=None):
        self.sent.append(prompt.prompt_id)
        failure = self.failures.get(prompt.prompt_id)
        if isinstance(failure, RequestFailed) and not isinstance(failure, ConnectFailed):
            return StreamResult(sent_unix_s=0.0, sent_ns=1).fail(failure, 2)
        if failure is not None:
            raise failure
        return StreamResult(sent_unix_s=0.0, sent_ns=1, end_ns=4, first_token_ns=2, last_token_ns=3,
                            chunk_ns=[2, 3], chunk_tokens=[1, 2], completion_tokens=2, prompt_tokens=3,
                            cached_tokens=0, finish_reason="length", received_bytes=64)

    def snapshot(self, http, base_url):
        return {}

    async def counters(self, http, base_url):
        return {"drafts": float(len(self.sent))}

    async def flush_prefix_cache(self, http, base_url):
        self.sent.append("flush")
        return "flushed"


class ListWorkload:
    name = "list"

    def __init__(self, count: int) -> None:
        self.count = count

    def _prompts(self, label, count):
        return [Prompt(f"{label}{i}", SamplingParams(max_new_tokens=2), input_ids=(1, 2, 3)) for i in range(count)]

    def prompts(self):
        return self._prompts("p", self.count)

    def warmup_prompts(self, count):
        return self._prompts("w", count)

    def spec(self):
        return {"name": self.name}


def _run(tmp_path, backend, count=5, concurrency=1, flush=False):
    run = RunDir.create(tmp_path, "run", {"workload": {"name": "list"}})
    options = RunOptions(base_url="http://x", warmup=2, concurrency=concurrency, show_progress=False,
                         flush_prefix_cache=flush)
    return run, lambda: execute(backend, options, ListWorkload(count), run)


def _manifest(tmp_path):
    return json.loads((tmp_path / "run" / "manifest.json").read_text())


@pytest.mark.parametrize("concurrency", [1, 3])
def test_complete_run_records_measured_prompts_only(tmp_path, concurrency):
    backend = ScriptedBackend()
    run, go = _run(tmp_path, backend, concurrency=concurrency)
    go()
    assert backend.sent[:2] == ["w0", "w1"]
    table = load_requests(run.path)
    assert sorted(table["prompt_id"]) == ["p0", "p1", "p2", "p3", "p4"]
    assert (run.path / "requests.parquet").exists()
    manifest = _manifest(tmp_path)
    assert manifest["status"] == "complete"
    # Counters are read after the two warm-up requests and after the five measured ones.
    assert manifest["server_counters"] == {"before": {"drafts": 2.0}, "after": {"drafts": 7.0}}


def test_prefix_cache_is_flushed_after_warm_up_and_before_measuring(tmp_path):
    backend = ScriptedBackend()
    run, go = _run(tmp_path, backend, count=2, flush=True)
    go()
    assert backend.sent == ["w0", "w1", "flush", "p0", "p1"]
    assert _manifest(tmp_path)["prefix_cache_flush"] == "flushed"


def test_no_flush_unless_asked(tmp_path):
    backend = ScriptedBackend()
    _, go = _run(tmp_path, backend, count=1)
    go()
    assert "flush" not in backend.sent


def test_a_failed_request_is_a_record_and_the_run_goes_on(tmp_path):
    run, go = _run(tmp_path, ScriptedBackend({"p1": MalformedStream("bad chunk")}))
    go()
    table = load_requests(run.path)
    assert table["prompt_id"].tolist() == ["p0", "p1", "p2", "p3", "p4"]
    assert table["status"].tolist() == ["ok", "error", "ok", "ok", "ok"]
    assert table.loc[1, "error_kind"] == "malformed_chunk" and table.loc[1, "error_message"] == "bad chunk"
    assert _manifest(tmp_path)["status"] == "complete"


@pytest.mark.parametrize("concurrency", [1, 4])
def test_one_failure_never_cancels_the_requests_in_flight(tmp_path, concurrency):
    run, go = _run(tmp_path, ScriptedBackend({"p2": ServerHTTPError("http://x answered HTTP 503")}), count=8,
                   concurrency=concurrency)
    go()
    table = load_requests(run.path)
    assert len(table) == 8 and (table["status"] == "ok").sum() == 7


def test_errors_beyond_the_budget_stop_the_run_in_one_line(tmp_path):
    failures = {f"p{i}": ServerHTTPError("http://x answered HTTP 503") for i in range(5)}
    run = RunDir.create(tmp_path, "run", {"workload": {"name": "list"}})
    options = RunOptions(base_url="http://x", warmup=0, show_progress=False, max_errors=2)
    with pytest.raises(RunAborted, match=r"run failed after 3 of 5 requests \(3 failed requests, more than "
                                         r"--max-errors 2 \(http_status 3\)"):
        execute(ScriptedBackend(failures), options, ListWorkload(5), run)
    assert _manifest(tmp_path)["status"] == "failed" and len(load_requests(run.path)) == 3


def test_unreachable_server_past_the_grace_period_interrupts_the_run(tmp_path):
    run = RunDir.create(tmp_path, "run", {"workload": {"name": "list"}})
    options = RunOptions(base_url="http://x", warmup=0, show_progress=False, unreachable_grace_s=0.0)
    backend = ScriptedBackend({"p3": ConnectFailed("cannot connect to http://x")})
    with pytest.raises(RunAborted, match=r"run interrupted after 4 of 5 requests \(server unreachable"):
        execute(backend, options, ListWorkload(5), run)
    # p3 never reached the server: it went back in the queue, was tried again, and is not a record.
    assert load_requests(run.path)["prompt_id"].tolist() == ["p0", "p1", "p2", "p4"]
    assert backend.sent.count("p3") >= 2
    assert _manifest(tmp_path)["status"] == "interrupted"


def test_a_failed_warm_up_finalizes_the_manifest(tmp_path):
    run = RunDir.create(tmp_path, "run", {"workload": {"name": "list"}})
    options = RunOptions(base_url="http://x", warmup=1, show_progress=False)
    with pytest.raises(RunAborted, match="warm-up request failed, nothing measured: boom"):
        execute(ScriptedBackend({"w0": ServerHTTPError("boom")}), options, ListWorkload(2), run)
    assert _manifest(tmp_path)["status"] == "failed"


def test_a_workload_that_cannot_build_its_prompts_finalizes_the_manifest(tmp_path):
    class Broken(ListWorkload):
        def prompts(self):
            raise SparkbenchError("600 distinct first tokens asked from a 500-token vocabulary")

    run = RunDir.create(tmp_path, "run", {"workload": {"name": "list"}})
    with pytest.raises(RunAborted, match="500-token vocabulary"):
        execute(ScriptedBackend(), RunOptions(base_url="http://x", show_progress=False), Broken(1), run)
    assert _manifest(tmp_path)["status"] == "failed"


def test_ctrl_c_marks_the_run_interrupted(tmp_path):
    run, go = _run(tmp_path, ScriptedBackend({"p2": KeyboardInterrupt()}))
    with pytest.raises(RunAborted, match="Ctrl-C"):
        go()
    assert _manifest(tmp_path)["status"] == "interrupted"
    assert len(load_requests(run.path)) == 2


class SignalledBackend(ScriptedBackend):
    """Sends SIGTERM to its own process while request `p1` is in flight, as a scheduler would."""

    async def send(self, http, base_url, prompt, deadlines=None):
        if prompt.prompt_id == "p1":
            os.kill(os.getpid(), signal.SIGTERM)
        await asyncio.sleep(0.05)  # every request takes a while: the signal arrives while some are under way
        return await super().send(http, base_url, prompt, deadlines)


def test_first_signal_stops_new_requests_and_records_those_in_flight(tmp_path):
    run, go = _run(tmp_path, SignalledBackend(), count=5, concurrency=2)
    with pytest.raises(RunAborted, match=r"run interrupted .*stop asked \(SIGTERM\)"):
        go()
    ids = load_requests(run.path)["prompt_id"].tolist()
    assert "p1" in ids and len(ids) < 5  # in flight: recorded; the rest: never sent
    assert _manifest(tmp_path)["status"] == "interrupted"


def test_unexpected_error_still_finalizes_then_propagates(tmp_path):
    run, go = _run(tmp_path, ScriptedBackend({"p1": ZeroDivisionError("bug")}))
    with pytest.raises(ZeroDivisionError):
        go()
    assert _manifest(tmp_path)["status"] == "failed"
    assert (run.path / "requests.parquet").exists()


class StepSensor:
    """A fake power sensor: 1 J more at every reading."""

    def __init__(self) -> None:
        self.info = SensorInfo(sensor="fake:0", domain="gpu", device="fake", method="fake", energy_unit_j=1.0,
                               wrap=None)
        self.energy = 0.0

    def read(self):
        self.energy += 1.0
        return self.energy, 100.0


def test_power_is_sampled_around_the_measured_requests_and_kept_when_the_run_stops(tmp_path, monkeypatch):
    monkeypatch.setattr("harness.power.sampler.discover", lambda: ([StepSensor()], []))
    run = RunDir.create(tmp_path, "run", {"workload": {"name": "list"}})
    options = RunOptions(base_url="http://x", warmup=0, show_progress=False, unreachable_grace_s=0.0)
    with pytest.raises(RunAborted):
        execute(ScriptedBackend({"p3": ConnectFailed("cannot connect")}), options, ListWorkload(5), run)
    power = _manifest(tmp_path)["power"]
    assert power["status"] == "measured" and power["sensors"][0]["sensor"] == "fake:0"
    samples = load_power_samples(run.path)
    assert power["samples"] == len(samples) >= 2  # one before the first request, one after the last
    assert samples["energy_raw"].is_monotonic_increasing


def test_no_power_sensor_leaves_the_run_not_measured(tmp_path, monkeypatch):
    monkeypatch.setattr("harness.power.sampler.discover", lambda: ([], ["NVML: no GPU"]))
    _, go = _run(tmp_path, ScriptedBackend(), count=1)
    go()
    assert _manifest(tmp_path)["power"] == {"status": "not measured", "interval_ms": 100.0, "sensors": [],
                                            "not_available": ["NVML: no GPU"], "file": None}
