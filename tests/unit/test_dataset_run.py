"""`sparkbench run dataset` against the scripted server: the shipped example through SGLang's native
API (rendered conversations, a second turn after the model's answer with its own length, each row's
sampling) and through the OpenAI chat API (the messages as they are), and a row too long for the
server's context refused before any request."""

from __future__ import annotations

import hashlib
import json

from typer.testing import CliRunner

from harness.analysis.run import Run
from harness.cli import app
from harness.errors import SparkbenchError
from tests.fakes.recording_server import recording
from tests.fakes.stream_server import MAX_MODEL_LEN, Script
from tests.unit.test_dataset_workload import EXAMPLES, tokenizer_folder, write_jsonl

EXAMPLE = EXAMPLES / "example.jsonl"
STREAMS = ("/generate", "/v1/completions", "/v1/chat/completions")


def dataset_run(tmp_path, url: str, path, *extra: str):
    results = tmp_path / "runs"
    done = CliRunner().invoke(app, ["run", "dataset", "--path", str(path), "--tokenizer",
                                    str(tokenizer_folder(tmp_path / "tok")), "--server", url, "--results",
                                    str(results), "--warmup", "1", "--no-progress", *extra])
    return done, results


def test_the_example_runs_on_the_native_api_with_its_turns_lengths_and_sampling(tmp_path):
    with recording(Script(api="sglang")) as (url, seen):
        done, results = dataset_run(tmp_path, url, EXAMPLE)
    assert done.exit_code == 0, done.output
    run = Run.load(next(results.iterdir()))
    records = run.requests.set_index("prompt_id")
    assert list(records.index) == ["dataset-0", "dataset-1", "dataset-2", "dataset-3", "dataset-3/turn2"]
    assert (records["status"] == "ok").all()
    sampling = {pid: json.loads(raw) for pid, raw in records["sampling_json"].items()}
    assert [sampling[pid]["max_new_tokens"] for pid in records.index] == [32, 24, 48, 40, 24]
    assert (sampling["dataset-1"]["temperature"], sampling["dataset-1"]["seed"]) == (0.7, 7)
    assert records["completion_tokens"].tolist() == [32, 24, 48, 40, 24]  # ignore_eos: each length in full
    second = json.loads(records.loc["dataset-3/turn2", "item_json"])
    assert second["chat_messages"][1] == {"role": "assistant", "content": records.loc["dataset-3", "output_text"]}
    sent = [body for _, path, _, body in seen if path == "/generate"]
    assert sent[3]["text"] == records.loc["dataset-2", "prompt_text"]  # the rendered conversation
    assert sent[3]["text"].startswith("<system> You answer in one short paragraph.")
    spec = run.record.workload.as_recorded()
    assert spec["data_sha256"] == hashlib.sha256(EXAMPLE.read_bytes()).hexdigest()
    assert (spec["num_rows"], spec["num_prompts"], spec["num_turns"]) == (5, 4, 5)
    assert run.record.workload_config["path"] == str(EXAMPLE)


def test_the_chat_api_gets_the_rows_messages_as_they_are(tmp_path):
    with recording(Script()) as (url, seen):
        done, results = dataset_run(tmp_path, url, EXAMPLE, "--chat", "--backend", "openai", "--num-prompts", "3")
    assert done.exit_code == 0, done.output
    chats = [body["messages"] for _, path, _, body in seen if path == "/v1/chat/completions"][1:]  # after warm-up
    assert chats[0] == [{"role": "user", "content": "Explain in two sentences why the sky looks blue."}]
    assert chats[2] == [{"role": "system", "content": "You answer in one short paragraph."},
                        {"role": "user", "content": "What does a compiler do?"}]


def test_a_row_past_the_servers_context_is_refused_before_any_request(tmp_path):
    long = write_jsonl(tmp_path / "long.jsonl", [{"prompt": "fine"}, {"prompt": " ".join(["w"] * MAX_MODEL_LEN)}])
    with recording(Script()) as (url, seen):
        done, results = dataset_run(tmp_path, url, long, "--backend", "openai")
    assert isinstance(done.exception, SparkbenchError)
    assert f"row 1: prompt: {MAX_MODEL_LEN:,} prompt tokens + 256 new tokens" in str(done.exception)
    assert not [path for _, path, _, _ in seen if path in STREAMS] and not results.exists()


def test_sharegpt_conversations_keep_their_own_id_in_the_records(tmp_path):
    with recording(Script(api="sglang")) as (url, _):
        done, results = dataset_run(tmp_path, url, EXAMPLES / "example_sharegpt.json", "--max-turns", "1")
    assert done.exit_code == 0, done.output
    items = [json.loads(raw) for raw in Run.load(next(results.iterdir())).requests.sort_values("seq")["item_json"]]
    assert [item.get("source_id") for item in items] == ["sg-1", "sg-2"]
