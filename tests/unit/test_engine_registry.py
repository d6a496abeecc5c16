"""Engine adapters: the shipped ones are found in detection order, and an adapter registered from
outside the package is picked up by detection, the client, the records, the metrics and the guard."""

from __future__ import annotations

import json
import math
from typing import Any

import httpx
import pytest

from harness.engines import registry
from harness.engines.detect import make_backend
from harness.engines.meta import speculation_columns
from harness.engines.registry import Engine, detect, engine_named, engines, launchable_engines, meta_reader
from harness.errors import SparkbenchError
from harness.guard.preflight import server_facts
from harness.guard.profiles import profile_from_dict
from harness.metrics import derive_requests, summarize
from harness.run.embedded import launch_spec

BASE = "http://toy.test"


class ToyEngine(Engine):
    """A made-up engine: `/toy_info` names it, its meta holds seconds and a draft count."""

    name = "toy"
    model_flag = "--weights"
    detect_order = 5

    def detect(self, http: httpx.Client, base_url: str) -> bool:
        return http.get(base_url + "/toy_info").status_code == 200

    def server_times_ms(self, meta: dict[str, Any]) -> tuple[float, float]:
        return meta["toy_ttft_s"] * 1000, meta["toy_e2e_s"] * 1000

    def speculation(self, meta: dict[str, Any], completion_tokens: float) -> dict[str, float]:
        rounds = meta["toy_rounds"]
        return speculation_columns(completion_tokens / rounds, rounds, math.nan, math.nan, math.nan)

    def server_facts(self, snapshot: dict[str, Any], launch_args: tuple[str, ...]) -> dict[str, Any]:
        return {"version": snapshot["toy_version"]}

    def launch_args(self, model_dir, served_model_name=None) -> list[str]:
        return ["--toy-mode"]


@pytest.fixture
def toy(monkeypatch):
    engines()  # the shipped adapters first, as any lookup would
    monkeypatch.setitem(registry.ENGINES, "toy", ToyEngine())
    return registry.ENGINES["toy"]


def routes(paths: dict[str, httpx.Response]) -> httpx.Client:
    return httpx.Client(transport=httpx.MockTransport(
        lambda request: paths.get(request.url.path, httpx.Response(404, json={"detail": "Not Found"}))))


def test_shipped_adapters_in_detection_order():
    assert list(engines()) == ["sglang", "llamacpp", "vllm", "openai"]
    assert launchable_engines() == ("sglang", "llamacpp", "vllm")
    assert engine_named("sglang").native_api == "sglang"
    assert engine_named("vllm").native_api == "openai"


def test_unknown_engine_is_one_line_and_unknown_records_read_as_nothing():
    with pytest.raises(SparkbenchError, match="unknown engine 'tgi'; known engines: sglang, llamacpp, vllm, openai"):
        engine_named("tgi")
    assert all(math.isnan(v) for v in meta_reader("tgi").server_times_ms({"e2e_latency": 1.0}))


def test_detection_asks_each_adapter_in_order():
    models = httpx.Response(200, json={"data": [{"id": "m", "owned_by": "vllm"}]})
    with routes({"/server_info": httpx.Response(200, json={}), "/v1/models": models}) as http:
        assert detect(http, BASE).name == "sglang"
    with routes({"/v1/models": httpx.Response(200, json={"data": [{"id": "m", "owned_by": "vllm"}]})}) as http:
        assert detect(http, BASE).name == "vllm"
    with routes({"/v1/models": httpx.Response(200, json={"data": [{"id": "m", "owned_by": "me"}]})}) as http:
        assert detect(http, BASE).name == "openai"


def test_a_registered_adapter_is_detected_and_gets_the_client(toy):
    with routes({"/toy_info": httpx.Response(200), "/v1/models": httpx.Response(200, json={"data": []})}) as http:
        assert detect(http, BASE) is toy
    client = make_backend("auto", BASE, model="m", engine="toy")
    assert (client.name, client.engine, client.model) == ("openai", "toy", "m")


def test_a_registered_adapter_reads_its_records(toy, make_record, frame_of):
    meta = {"toy_ttft_s": 0.05, "toy_e2e_s": 0.2, "toy_rounds": 2}
    record = make_record(chunks=[(60, 1), (120, 3), (200, 4)], meta=meta)
    record.engine, record.api = "toy", "openai"
    row = derive_requests(frame_of([record])).iloc[0]
    assert (row["server_ttft_ms"], row["server_e2e_ms"]) == (50.0, 200.0)
    assert (row["accept_length"], row["verify_rounds"]) == (4.0, 2.0)
    summary = summarize(frame_of([record]), "run-test", "synthetic").set_index(["metric", "stat"])["value"]
    assert summary[("accept_length_token_weighted", "value")] == 4.0


def test_a_registered_adapter_is_launched_and_guarded(toy, tmp_path):
    profile = profile_from_dict({"name": "toy-run", "engine": "toy", "launch": {"module": "toy.serve"},
                                 "expect": {"version": "1.0"}}, tmp_path / "toy.yaml")
    spec = launch_spec(profile, model_dir=tmp_path, port=9, env_python=tmp_path / "python")
    assert list(spec.argv)[3:] == ["--weights", str(tmp_path), "--host", "127.0.0.1", "--port", "9", "--toy-mode"]
    assert server_facts(profile, {"toy_version": "1.0"}) == {"version": "1.0"}


def test_records_name_engine_and_api(make_record):
    record = json.loads(json.dumps(make_record(engine="vllm").__dict__))
    assert (record["engine"], record["api"]) == ("vllm", "openai")
    assert "backend" not in record
