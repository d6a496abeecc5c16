"""Request shaping: `--header NAME:VALUE` reaches every request and its value nothing written;
`--extra-body JSON` is merged into every streamed body on both APIs, recorded in the manifest, and
a field the client sets itself is refused before any request."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from harness.analysis.run import Run
from harness.analysis.shapes import shape_key, why_apart
from harness.cli import app
from harness.config import validated
from harness.engines.shaping import ExtraBodyClash, with_extra_body
from harness.errors import SparkbenchError
from harness.run.options import RunSettings
from harness.secrets import redact, redact_argv
from tests.fakes.recording_server import recording
from tests.fakes.stream_server import Script

SECRET = "tenant-secret-42"
GSM8K = ["run", "gsm8k", "--limit", "2", "--max-new-tokens", "4", "--warmup", "1", "--no-progress"]
STREAMS = ("/generate", "/v1/completions", "/v1/chat/completions")


def settings(**options) -> RunSettings:
    return validated(RunSettings, options, "run")


def test_headers_are_sent_as_given_and_dumped_with_their_values_masked():
    given = settings(header=[f"X-Tenant: {SECRET}", "X-Route:b"], api_key="k" * 12)
    assert given.headers == {"Authorization": "Bearer " + "k" * 12, "X-Tenant": SECRET, "X-Route": "b"}
    assert given.model_dump(mode="json")["header"] == ["X-Tenant:***", "X-Route:***"]


@pytest.mark.parametrize("header, message", [
    ("X-Tenant", "is not NAME:VALUE"),
    ("Bad Name: v", "is not an HTTP header name"),
    ("Content-Length: 3", "set by the transport itself"),
    ("X-A: one\r\nX-B: two", "holds a line break"),
])
def test_a_header_the_transport_cannot_send_is_refused_in_one_line(header, message):
    with pytest.raises(SparkbenchError, match=f"^run: header: .*{message}"):
        settings(header=[header])


def test_an_authorization_header_beside_an_api_key_is_refused():
    with pytest.raises(SparkbenchError, match="--header Authorization and --api-key both"):
        settings(header=["authorization: Bearer x"], api_key="k" * 12)


@pytest.mark.parametrize("text, message", [("{min_p: 1}", "is not JSON"), ("[1, 2]", "is a JSON list, not an object")])
def test_an_extra_body_that_is_no_json_object_is_refused(text, message):
    with pytest.raises(SparkbenchError, match=f"extra_body: --extra-body {message}"):
        settings(extra_body=text)


def test_an_extra_body_merges_objects_key_by_key_and_refuses_what_the_client_sets():
    body = {"text": "hi", "stream": True, "sampling_params": {"temperature": 0.0}}
    merged = with_extra_body(body, {"sampling_params": {"min_p": 0.1}, "return_logprob": False})
    assert merged == {"text": "hi", "stream": True, "return_logprob": False,
                      "sampling_params": {"temperature": 0.0, "min_p": 0.1}}
    with pytest.raises(ExtraBodyClash, match="sets sampling_params.temperature, which sparkbench sends itself"):
        with_extra_body(body, {"sampling_params": {"temperature": 1.0}})


def test_a_command_line_is_written_with_header_values_masked():
    argv = ["sparkbench", "run", "gsm8k", "--header", f"X-Tenant:{SECRET}", f"--header=X-B: {SECRET}"]
    assert redact_argv(argv)[3:] == ["--header", "X-Tenant:***", "--header=X-B:***"]


def _files_text(folder: Path) -> str:
    return "".join(path.read_bytes().decode("utf-8", "replace") for path in folder.rglob("*") if path.is_file())


@pytest.mark.parametrize("api, extra, merged", [
    ("sglang", {"sampling_params": {"min_p": 0.1}, "return_logprob": False},
     lambda body: (body["sampling_params"]["min_p"], body["return_logprob"]) == (0.1, False)),
    ("openai", {"min_p": 0.1}, lambda body: body["min_p"] == 0.1),
])
def test_both_apis_send_the_header_and_extra_body_and_the_run_records_them(tmp_path, api, extra, merged):
    results = tmp_path / "runs"
    with recording(Script(api=api)) as (url, seen):
        done = CliRunner().invoke(app, [*GSM8K, "--server", url, "--results", str(results),
                                        "--header", f"X-Tenant: {SECRET}", "--extra-body", json.dumps(extra)])
    assert done.exit_code == 0, done.output
    streams = [(headers, body) for method, path, headers, body in seen if path in STREAMS]
    assert len(streams) == 3  # the warm-up and two questions
    assert all(headers["X-Tenant"] == SECRET and merged(body) for headers, body in streams)
    scrapes = [headers for _, path, headers, _ in seen if path == "/metrics"]  # telemetry: the control plane
    assert scrapes and all(headers["X-Tenant"] == SECRET for headers in scrapes)
    run = Run.load(next(results.iterdir()))
    assert run.record.options.header == ["X-Tenant:***"] and run.record.options.extra_body == extra
    assert SECRET not in _files_text(results) and SECRET not in done.output
    assert redact(f"a server echoing {SECRET}") == "a server echoing ***"  # remembered as the API key is


def test_an_extra_body_field_the_client_sets_is_refused_before_any_request(tmp_path):
    results = tmp_path / "runs"
    with recording(Script(api="sglang")) as (url, seen):
        done = CliRunner().invoke(app, [*GSM8K, "--server", url, "--results", str(results),
                                        "--extra-body", '{"stream": false}'])
    assert isinstance(done.exception, ExtraBodyClash) and done.exception.exit_code == 2  # `sparkbench: ...`, exit 2
    assert str(done.exception).startswith("--extra-body sets stream, which sparkbench sends itself")
    assert not [path for _, path, _, _ in seen if path in STREAMS] and not results.exists()


def test_runs_with_different_extra_bodies_are_different_shapes():
    def run(extra: dict | None) -> Run:
        return Run("/nowhere", {"run_id": "r", "workload": {"name": "gsm8k"}, "options": {"extra_body": extra}})

    assert shape_key(run(None)) == shape_key(run({}))
    assert shape_key(run(None)) != shape_key(run({"min_p": 0.1}))
    assert why_apart(run(None), run({"min_p": 0.1})) == "different shape (extra_body)"


def test_sweep_and_nightly_configs_take_a_dataset_workload_and_the_shaping_options(tmp_path):
    from harness.nightly.config import load_config
    from harness.sweep.config import load_sweep_config

    shared = ('header: ["X-Tenant: bench"]\nextra_body: {min_p: 0.1}\nworkloads:\n'
              '  - {name: dataset, options: {path: workloads/data/dataset/example.jsonl, max_turns: 1}}\n')
    (tmp_path / "sweep.yaml").write_text('configurations:\n  - {name: a, server: "http://127.0.0.1:1"}\n' + shared)
    (tmp_path / "nightly.yaml").write_text(f'server: "http://127.0.0.1:1"\nstate_dir: {tmp_path}/state\n' + shared)
    cell = load_sweep_config(tmp_path / "sweep.yaml").cell_settings(concurrency=1)
    nightly = RunSettings.part_of(load_config(tmp_path / "nightly.yaml"))
    for options in (cell, nightly):
        assert options.headers == {"X-Tenant": "bench"} and options.extra_body == {"min_p": 0.1}
    (tmp_path / "bad.yaml").write_text(shared.replace("max_turns: 1", "max_turn: 1"))
    with pytest.raises(SparkbenchError, match="unknown keys max_turn"):
        load_config(tmp_path / "bad.yaml")


@pytest.mark.parametrize("api, extra, field", [
    ("openai", {"max_tokens": 5}, "max_tokens"),  # the docs' promise: refused before any request
    ("sglang", {"sampling_params": {"temperature": 1.0}}, "sampling_params.temperature"),
    ("openai", {"prompt": "another"}, "prompt"),
])
@pytest.mark.parametrize("backend", ["auto", "named"])
def test_an_extra_body_field_is_refused_before_even_the_engine_is_detected(tmp_path, api, extra, field, backend):
    results = tmp_path / "runs"
    named = ["--backend", api] if backend == "named" else []
    with recording(Script(api=api)) as (url, seen):
        done = CliRunner().invoke(app, [*GSM8K, "--server", url, "--results", str(results), *named,
                                        "--extra-body", json.dumps(extra)])
    assert isinstance(done.exception, ExtraBodyClash) and done.exception.exit_code == 2
    assert str(done.exception).startswith(f"--extra-body sets {field}, which sparkbench sends itself")
    assert "\n" not in str(done.exception)
    assert seen == [] and not results.exists()  # not one request: no detection, no facts, no stream

