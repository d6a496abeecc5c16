"""`sparkbench run dataset` on the real SGLang test-bed server, through its native API (with a header
and an extra body the engine honours) and through the OpenAI chat API: the shipped example's rows,
their lengths against the server's own counts, the second turn after the model's own answer."""

from __future__ import annotations

import hashlib
import json

import pytest

from harness.analysis.run import Run
from tests.e2e.conftest import only_run_dir, sparkbench
from tests.e2e.proxy import recording_proxy

EXAMPLE = "workloads/data/dataset/example.jsonl"
CAP = 8  # every turn's output length, capped: the fewest tokens that still show each row's own
SECRET = "e2e-header-value-7"


def _dataset(server, results, *extra: str) -> Run:
    done = sparkbench("run", "dataset", "--path", EXAMPLE, "--tokenizer", str(server.model_dir), "--server",
                      server.base_url, "--max-output-tokens", str(CAP), "--warmup", "1", "--results", str(results),
                      "--no-progress", *extra)
    assert done.returncode == 0, done.stderr
    return Run.load(only_run_dir(results))


@pytest.fixture(scope="module")
def native(sglang_server, tmp_path_factory):
    """The whole example (4 conversations, 5 turns) on /generate, through a proxy that keeps the bodies."""
    results = tmp_path_factory.mktemp("dataset-native")
    seen: list = []
    with recording_proxy(sglang_server.base_url, seen) as (url, bodies):
        done = sparkbench("run", "dataset", "--path", EXAMPLE, "--tokenizer", str(sglang_server.model_dir),
                          "--server", url, "--max-output-tokens", str(CAP), "--warmup", "1", "--results",
                          str(results), "--no-progress", "--header", f"X-Trace: {SECRET}",
                          "--extra-body", '{"return_logprob": true}')
    assert done.returncode == 0, done.stderr
    return Run.load(only_run_dir(results)), bodies, seen


def test_each_row_is_sent_with_its_own_length_and_counted_as_the_server_counts(native):
    run, _, _ = native
    records = run.requests.set_index("prompt_id")
    assert list(records.index) == ["dataset-0", "dataset-1", "dataset-2", "dataset-3", "dataset-3/turn2"]
    assert (records["status"] == "ok").all()
    asked = [json.loads(raw)["max_new_tokens"] for raw in records["sampling_json"]]
    assert records["completion_tokens"].tolist() == asked == [CAP] * 5  # ignore_eos: each in full
    for prompt_id in ("dataset-0", "dataset-1", "dataset-2", "dataset-3"):
        item = json.loads(records.loc[prompt_id, "item_json"])
        assert item["counted_input_tokens"] == records.loc[prompt_id, "prompt_tokens"]  # the server's tokenizer
    second = json.loads(records.loc["dataset-3/turn2", "item_json"])
    assert second["chat_messages"][1] == {"role": "assistant", "content": records.loc["dataset-3", "output_text"]}
    assert records.loc["dataset-3/turn2", "prompt_tokens"] > records.loc["dataset-3", "prompt_tokens"]
    assert json.loads(records.loc["dataset-1", "sampling_json"])["temperature"] == 0.7


def test_the_extra_body_reaches_the_engine_and_the_run_records_both(native):
    run, bodies, _ = native
    generate = [body for body in bodies if "sampling_params" in body]
    assert len(generate) == 6 and all(body["return_logprob"] is True for body in generate)
    metas = [json.loads(raw) for raw in run.requests["meta_info_json"]]
    assert all(meta.get("output_token_logprobs") for meta in metas)  # SGLang honoured its own field
    assert run.record.options.extra_body == {"return_logprob": True}
    assert run.record.options.header == ["X-Trace:***"]
    assert SECRET not in "".join(p.read_text(errors="replace") for p in run.path.rglob("*") if p.is_file()
                                 and p.suffix in (".json", ".jsonl", ".csv"))
    spec = run.record.workload.as_recorded()
    with open(EXAMPLE, "rb") as data:
        assert spec["data_sha256"] == hashlib.sha256(data.read()).hexdigest()


def test_the_chat_api_takes_the_rows_as_messages(sglang_server, tmp_path):
    run = _dataset(sglang_server, tmp_path, "--chat", "--backend", "openai", "--num-prompts", "3")
    records = run.requests.set_index("prompt_id")
    assert list(records.index) == ["dataset-0", "dataset-1", "dataset-2"] and (records["status"] == "ok").all()
    assert records["completion_tokens"].tolist() == [CAP] * 3 and run.record.api == "openai"
    # The system message went as a message: the server renders it with the same template the count
    # used, so its count and ours agree (a BOS the tokenizer adds to rendered text may be the one apart).
    system_row = json.loads(records.loc["dataset-2", "item_json"])
    assert system_row["chat_messages"][0]["role"] == "system"
    assert abs(system_row["counted_input_tokens"] - records.loc["dataset-2", "prompt_tokens"]) <= 1


def test_every_request_carries_the_users_header(native):
    """Detection, server facts, the guard's probes, the requests and the metrics scrapes: a gateway
    that wants the header sees it on each."""
    _, _, seen = native
    assert {method for method, _, _ in seen} == {"GET", "POST"}
    assert all(headers.get("x-trace") == SECRET for _, _, headers in seen), [
        (method, path) for method, path, headers in seen if headers.get("x-trace") != SECRET]
