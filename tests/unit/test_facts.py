"""Engine facts: each adapter normalises its server's snapshot into one vocabulary, the manifest keeps
them beside the raw snapshot with a version field, and a run recorded before them still loads."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from harness.analysis.run import Run
from harness.engines.registry import engine_named
from harness.errors import SparkbenchError
from harness.facts import NOT_EXPORTED, EngineFacts, SpeculativeFacts
from harness.records.manifest import MANIFEST_VERSION, RunRecord
from harness.report.report import manifest_facts

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"
RUN = {"run_id": "r1", "workload": {"name": "synthetic"}, "status": "complete"}


def _fixture(name: str):
    return json.loads((FIXTURES / name).read_text())


def test_sglang_facts_come_from_its_server_info():
    info = _fixture("sglang_0.5.23_cpu_server_info.json")
    facts = engine_named("sglang").facts({"server_info": info})
    assert facts.version == info["version"] and facts.model == info["model_path"]
    assert facts.tokenizer_path == info["tokenizer_path"] and facts.speculative.algorithm is None


def test_vllm_facts_come_from_its_version_models_and_launch_flags():
    snapshot = {"version": {"version": "0.32.0"}, "models": {"data": [{"id": "tiny", "root": "/models/tiny"}]}}
    flags = ("--speculative-config", '{"method": "ngram", "num_speculative_tokens": 3}')
    facts = engine_named("vllm").facts(snapshot, flags)
    assert (facts.version, facts.model, facts.tokenizer_path) == ("0.32.0", "/models/tiny", "/models/tiny")
    assert facts.speculative == SpeculativeFacts(algorithm="ngram", num_steps=3, num_draft_tokens=4)
    assert facts.speculation_shown() == "ngram, num steps 3, num draft tokens 4"
    assert engine_named("vllm").facts(snapshot).speculative is None  # no flags: not exported, not "none"


def test_llamacpp_facts_come_from_its_props_and_slots():
    props = _fixture("llamacpp_0.3.36_cuda_props_plain.json")
    facts = engine_named("llamacpp").facts({"props": props, "slots": [{"id": 0, "speculative": False}]})
    assert facts.version == props["build_info"] and facts.model == props["model_path"]
    assert facts.speculative == SpeculativeFacts() and facts.tokenizer_path is None
    through_openai = engine_named("llamacpp").facts({"models": {"data": [{"id": "tiny.gguf"}]}})
    assert through_openai.model == "tiny.gguf" and through_openai.shown("version") == NOT_EXPORTED
    assert through_openai.speculative is None and through_openai.speculation_shown() == NOT_EXPORTED
    assert facts.speculation_shown() == "none"


def test_a_run_recorded_before_the_facts_still_loads_and_shows_them():
    info = {"version": "0.5.23", "model_path": "/models/tiny"}
    old = Run("/nowhere", {**RUN, "backend": "sglang", "server": {"server_info": info}})
    assert old.record.manifest_version == 1
    assert (old.facts.engine, old.facts.version, old.facts.model) == ("sglang", "0.5.23", "/models/tiny")
    assert manifest_facts(old)["server version"] == "0.5.23"


def test_a_new_run_keeps_the_facts_beside_the_raw_snapshot():
    facts = EngineFacts(engine="vllm", version="0.32.0", model="/models/tiny")
    new = Run("/nowhere", {**RUN, "manifest_version": MANIFEST_VERSION, "engine": "vllm",
                           "server": {"version": {"version": "something else"}},
                           "engine_facts": facts.model_dump(mode="json")})
    assert new.facts == facts and manifest_facts(new)["model"] == "/models/tiny"
    assert manifest_facts(new)["speculative counters (server)"] == NOT_EXPORTED


def test_a_manifest_of_the_wrong_types_is_one_line_per_problem():
    with pytest.raises(SparkbenchError) as caught:
        RunRecord.of({**RUN, "manifest_version": "2", "engine_facts": {"version": 3}}, "m.json")
    lines = str(caught.value).splitlines()
    assert len(lines) == 2 and all(line.startswith("m.json: ") for line in lines)
