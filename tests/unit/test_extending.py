"""Extending sparkbench as a newcomer would: an OpenAI-compatible engine is one adapter plus its
profile, and a gated metric is one catalogue row; each flows through to the report and the gate.
(A made-up workload, one module and its registration, is followed in tests/unit/test_request.py.)"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import httpx
import pytest

from harness.analysis.tables import format_run_summary
from harness.engines import registry
from harness.engines.openai import OpenAIBackend
from harness.engines.registry import Engine, engines
from harness.facts import NOT_EXPORTED
from harness.guard.profiles import profile_from_dict
from harness.report.report import manifest_facts
from harness.request import RunSwitches
from harness.run.runner import RunOptions
from harness.run.target import Target
from harness.session import run_planned
from tests.unit.test_run import _plan
from tests.unit.test_runner import ScriptedBackend

BASE = "http://toy.test"
MODELS = {"object": "list", "data": [{"id": "toy-7b", "object": "model", "owned_by": "toy"}]}


class ToyServe(Engine):
    """The whole adapter of a made-up OpenAI-compatible engine: how to recognise it, what its
    `/toy_info` says, and the prefix of its Prometheus counters."""

    name = "toyserve"
    detect_order = 5
    metrics_prefix = "toy:"

    def detect(self, http: httpx.Client, base_url: str) -> bool:
        return http.get(base_url + "/toy_info").status_code == 200

    def server_facts(self, snapshot: dict[str, Any], launch_args: tuple[str, ...]) -> dict[str, Any]:
        return {}  # it says nothing beyond what the OpenAI API lists


@pytest.fixture
def toyserve(monkeypatch):
    engines()
    monkeypatch.setitem(registry.ENGINES, "toyserve", ToyServe())
    return registry.ENGINES["toyserve"]


class ToyClient(ScriptedBackend):
    """The OpenAI client's snapshot of a toyserve server, with scripted requests."""

    name, engine = "openai", "toyserve"

    def snapshot(self, http, base_url):
        routes = {"/v1/models": httpx.Response(200, json=MODELS),
                  "/version": httpx.Response(200, json={"version": "3.1"}),
                  "/metrics": httpx.Response(200, text="toy:requests_total 4\n")}
        transport = httpx.MockTransport(lambda request: routes.get(request.url.path, httpx.Response(404)))
        with httpx.Client(transport=transport) as toy_http:
            return OpenAIBackend(engine="toyserve").snapshot(toy_http, base_url)

    async def counters(self, http, base_url):
        return None  # what OpenAIBackend.counters answers for /metrics without the toy: spec counters


def test_an_openai_compatible_engine_is_one_adapter_and_a_profile(toyserve, tmp_path):
    profile = profile_from_dict({"name": "toy-plain", "engine": "toyserve", "launch": {"module": "toy.serve"}},
                                tmp_path / "toy-plain.yaml")
    options = RunOptions(base_url=BASE, warmup=0, show_progress=False, power_sample_ms=0)
    run = run_planned(Target(base_url=BASE, profile=profile), ToyClient(), _plan(2), options,
                      RunSwitches(results=tmp_path, guard=False))
    assert run.manifest["engine_facts"]["engine"] == "toyserve"
    facts = manifest_facts(run)
    assert (facts["server version"], facts["model"]) == ("3.1", "toy-7b")
    assert facts["speculative counters (server)"] == NOT_EXPORTED
    summary = format_run_summary(run)
    assert "server: toyserve 3.1, model toy-7b" in summary
    assert f"speculative counters (server): {NOT_EXPORTED}" in summary
    assert "GPU state: not measured (" in summary or "GPU state: measured (" in summary


GATED_ROW = """
import dataclasses, json, sys
from pathlib import Path

import harness.metrics.catalogue as catalogue

# The one change: decode_ms gets compared stats and a nightly gate in its catalogue row.
catalogue.CATALOGUE["decode_ms"] = dataclasses.replace(
    catalogue.CATALOGUE["decode_ms"], compared=("mean",), gate=0.05, gate_stat="mean")

from harness.analysis.compare import compare_loaded
from harness.analysis.run import Run
from harness.nightly.config import NightlyConfig
from harness.nightly.gate import verdicts
from tests.unit.test_report import synthetic_records, write_run

root = Path(sys.argv[1])
base = Run.load(write_run(root, "base", synthetic_records(10.0), {"name": "synthetic"}))
slower = Run.load(write_run(root, "slower", synthetic_records(15.0), {"name": "synthetic"}))
comparison = compare_loaded([base, slower], "base")
table = verdicts(comparison, NightlyConfig(state_dir=root, min_requests=6))
rows = comparison[(comparison["run_id"] == "slower") & (comparison["metric"] == "decode_ms")]
print(json.dumps({"summary": sorted(base.summary[base.summary["metric"] == "decode_ms"]["stat"]),
                  "compared": rows["stat"].tolist(),
                  "verdict": dict(zip(table["metric"], table["verdict"]))["decode_ms"]}))
"""


def test_a_gated_metric_is_one_catalogue_row(tmp_path):
    done = subprocess.run([sys.executable, "-c", GATED_ROW, str(tmp_path)], capture_output=True, text=True,
                          timeout=120, cwd=Path(__file__).resolve().parents[2])
    assert done.returncode == 0, done.stderr
    seen = json.loads(done.stdout)
    assert "mean" in seen["summary"] and seen["compared"] == ["mean"]
    assert seen["verdict"] == "regressed"  # 50% slower decode, past its 5% gate
