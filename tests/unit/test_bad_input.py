"""Bad input of any kind ends in one line `sparkbench: ...` and exit 2, never a traceback, and is
never silently accepted: hand-edited records, a binary config, a non-JSON model config, more
prompts than the vocabulary has first tokens (real CLI processes, fake server)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.fakes.broken_server import NONE, Breakage, breaking
from tests.unit.test_fault_cli import GSM8K, one_line_error, only_run, sparkbench


@pytest.fixture(scope="module")
def recorded(tmp_path_factory) -> Path:
    """A finished run of 6 requests; each test edits a copy of its records."""
    results = tmp_path_factory.mktemp("recorded")
    with breaking(Breakage(NONE)) as url:
        assert sparkbench(*GSM8K, "--server", url, "--results", str(results), cwd=Path.cwd()).returncode == 0
    return only_run(results)


def edited(recorded: Path, tmp_path: Path, edit) -> Path:
    """A copy of the recorded run whose JSONL rows went through `edit` (and no Parquet table)."""
    run = tmp_path / recorded.name
    run.mkdir()
    (run / "manifest.json").write_bytes((recorded / "manifest.json").read_bytes())
    rows = [json.loads(line) for line in (recorded / "requests.jsonl").read_text().splitlines()]
    for row in rows:
        edit(row)
    (run / "requests.jsonl").write_text("".join(json.dumps(row) + "\n" for row in rows))
    return run


BAD_RECORDS = {  # what the edit does -> what the one line says
    "a stamp as text": (lambda row: row.update(sent_ns="soon"), "sent_ns is not a whole number"),
    "a count as text": (lambda row: row.update(completion_tokens="16"), "completion_tokens is not a whole number"),
    "a negative count": (lambda row: row.update(completion_tokens=-16), "completion_tokens is below zero"),
    "no prompt id": (lambda row: row.update(prompt_id=None), "prompt_id is missing"),
    "chunk times as text": (lambda row: row.update(chunk_ns=["a", "b"]), "chunk_ns is not a list of whole numbers"),
    "no end stamp": (lambda row: row.pop("end_ns"), "no end_ns column"),
}


@pytest.mark.parametrize("case", sorted(BAD_RECORDS))
def test_hand_edited_records_are_refused_in_one_line(recorded, tmp_path, case):
    edit, said = BAD_RECORDS[case]
    run = edited(recorded, tmp_path, edit)
    assert said in one_line_error(sparkbench("summarize", str(run), cwd=Path.cwd()))


def test_a_binary_config_file_is_one_line(tmp_path):
    config = tmp_path / "nightly.yaml"
    config.write_bytes(b"\x89PNG\r\n\x1a\n\x00\x00\xff\xfe")
    done = sparkbench("nightly", "--config", str(config), cwd=Path.cwd())
    assert done.returncode == 2 and done.stderr.strip().splitlines() == [done.stderr.strip()]
    assert done.stderr.startswith("sparkbench nightly: ") and "is not UTF-8 text" in done.stderr


@pytest.mark.parametrize("content", [b"{ not json", b"\xff\xfe", b"[1, 2]"])
def test_a_model_config_that_is_not_a_json_object_is_one_line(recorded, tmp_path, content):
    config = tmp_path / "config.json"
    config.write_bytes(content)
    done = sparkbench("summarize", str(recorded), "--model-config", str(config), cwd=Path.cwd())
    assert "not a model config.json" in one_line_error(done)


def refused_before_any_run(tmp_path, vocabulary: int, prompts: int, input_tokens: int, output_tokens: int) -> str:
    """The one-line error of a synthetic run over a word-level tokenizer of `vocabulary` words,
    against a healthy fake server; the run must be refused before its folder is created."""
    from tokenizers import Tokenizer, models

    words = {f"w{i}": i for i in range(vocabulary)}
    Tokenizer(models.WordLevel(words, unk_token="w0")).save(str(tmp_path / "tokenizer.json"))
    with breaking(Breakage(NONE)) as url:
        done = sparkbench("run", "synthetic", "--server", url, "--tokenizer", str(tmp_path), "--num-prompts",
                          str(prompts), "--input-tokens", str(input_tokens), "--output-tokens", str(output_tokens),
                          "--results", str(tmp_path / "r"), cwd=Path.cwd())
    line = one_line_error(done)
    assert not (tmp_path / "r").exists()  # refused before any run was created
    return line


def test_more_prompts_than_first_tokens_is_one_line(tmp_path):
    assert "more than the 8 ordinary tokens" in refused_before_any_run(tmp_path, 8, 9, 4, 2)


@pytest.mark.parametrize(("flag", "value"), [("--seed", "-1"), ("--salt", "-5"), ("--input-tokens", "2000000000"),
                                             ("--output-tokens", "1000000000000000"), ("--num-prompts", "10000000")])
def test_options_past_any_model_are_refused_before_the_server_is_asked(flag, value):
    done = sparkbench("run", "synthetic", "--server", "http://127.0.0.1:9", flag, value, cwd=Path.cwd())
    assert f"Invalid value for '{flag}'" in one_line_error(done)


def test_more_prompt_tokens_than_a_run_holds_is_one_line():
    done = sparkbench("run", "synthetic", "--server", "http://127.0.0.1:9", "--num-prompts", "100000",
                      "--input-tokens", "1000", cwd=Path.cwd())
    assert "100,000,000 prompt tokens" in one_line_error(done)


def test_a_shape_past_the_servers_context_is_one_line_and_creates_no_run(tmp_path):
    assert "more than the 2,048-token context" in refused_before_any_run(tmp_path, 64, 2, 2000, 100)


@pytest.mark.parametrize("entry", [{"options": [4]}, {"profile": "cpu"}, {"status": 3}, {"launched_server": "x"}])
def test_a_manifest_entry_of_the_wrong_type_is_one_line(recorded, tmp_path, entry):
    run = edited(recorded, tmp_path, lambda row: None)
    manifest = json.loads((run / "manifest.json").read_text()) | entry
    (run / "manifest.json").write_text(json.dumps(manifest))
    (key,) = entry
    assert f"manifest.json: {key}: Input should be" in one_line_error(sparkbench("summarize", str(run), cwd=Path.cwd()))


@pytest.mark.parametrize(("snapshot", "context"), [
    ({"models": {"data": [{"id": "m", "max_model_len": 4096}]}}, 4096),  # vLLM, SGLang's OpenAI API
    ({"server_info": {"context_length": 32768}}, 32768),  # SGLang's native facts
    ({"props": {"default_generation_settings": {"n_ctx": 512}}}, 512),  # llama.cpp
    ({"models": {"data": [{"id": "m"}]}, "server_info": {"context_length": None}}, None),  # stated nowhere
])
def test_the_context_is_read_where_each_api_states_it(snapshot, context):
    from harness.engines.limits import context_tokens

    assert context_tokens(snapshot) == context


@pytest.mark.parametrize(("flag", "value"), [("--first-token-timeout", "-1"), ("--request-deadline", "0"),
                                             ("--request-deadline", "nan"), ("--request-timeout", "nan")])
def test_deadlines_that_cannot_be_are_refused(flag, value):
    done = sparkbench("run", "gsm8k", "--server", "http://127.0.0.1:9", flag, value, cwd=Path.cwd())
    assert "greater than" in one_line_error(done)  # refused before the server is asked


@pytest.mark.parametrize("port", ["99999", "0"])
def test_a_port_that_is_not_a_tcp_port_is_one_line(port):
    done = sparkbench(*GSM8K, "--server", f"http://127.0.0.1:{port}", cwd=Path.cwd())
    assert f"port {port} is not a TCP port" in one_line_error(done)


BAD_SCHEDULES = {  # file text -> what the one line says
    "-1\n2\n": "is not a finite number >= 0",
    "1\n3\n2\n": "comes before the one above it",
    "1\nsoon\n": "'soon' is not a number of seconds",
    "1\n1000000000000\n": "make a run longer than 7 days",
}


@pytest.mark.parametrize("text", sorted(BAD_SCHEDULES))
def test_a_bad_schedule_is_refused_before_the_server_is_asked(text, tmp_path):
    schedule = tmp_path / "schedule.csv"
    schedule.write_text(text)
    done = sparkbench(*GSM8K, "--server", "http://127.0.0.1:9", "--schedule", str(schedule),
                      "--results", str(tmp_path / "results"), cwd=Path.cwd())
    assert BAD_SCHEDULES[text] in one_line_error(done)
    assert not (tmp_path / "results").exists()


def test_a_schedule_with_no_offset_within_the_duration_is_refused(tmp_path):
    schedule = tmp_path / "schedule.csv"
    schedule.write_text("120\n130\n")
    done = sparkbench(*GSM8K, "--server", "http://127.0.0.1:9", "--schedule", str(schedule), "--duration", "60s",
                      cwd=Path.cwd())
    assert "no offset within --duration 60 s" in one_line_error(done)
