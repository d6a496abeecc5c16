"""The dataset workload: every file form read through `datasets`, text, chat and ShareGPT rows,
multi-turn conversations, lengths counted with the model's tokenizer, rows that do not fit refused in
one line naming the row and the column, and a spec that tells different data apart."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pandas as pd
import pytest

from harness.analysis.run import Run
from harness.analysis.shapes import shape_key, shape_text
from harness.chat import next_turn
from harness.errors import SparkbenchError
from harness.facts import EngineFacts
from workloads.dataset import DatasetWorkload
from workloads.registry import build

EXAMPLES = Path(__file__).parents[2] / "workloads" / "data" / "dataset"
TEMPLATE = "{% for m in messages %}<{{ m['role'] }}> {{ m['content'] }} {% endfor %}<assistant>"
ROWS = [
    {"prompt": "one two three", "output_tokens": 5, "category": "short"},
    {"prompt": "four five", "sampling": {"temperature": 0.5, "seed": 3}},
    {"messages": [{"role": "system", "content": "be brief"}, {"role": "user", "content": "six seven"}],
     "output_tokens": 7},
]


def tokenizer_folder(folder: Path, template: bool = True) -> Path:
    """A word-level tokenizer (one token per word) and, with `template`, a chat template."""
    from tokenizers import Tokenizer, models, pre_tokenizers

    tokenizer = Tokenizer(models.WordLevel({"[UNK]": 0, "one": 1}, unk_token="[UNK]"))
    tokenizer.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
    folder.mkdir(parents=True, exist_ok=True)
    tokenizer.save(str(folder / "tokenizer.json"))
    if template:
        (folder / "tokenizer_config.json").write_text(json.dumps({"chat_template": TEMPLATE}))
    return folder


@pytest.fixture
def tokenizer(tmp_path) -> Path:
    return tokenizer_folder(tmp_path / "tokenizer")


def workload(path: Path | str, tokenizer: Path, **options) -> DatasetWorkload:
    plan = build("dataset", {"path": str(path), "tokenizer": str(tokenizer), **options}, reduced=False, model_dir=None)
    return plan.make(EngineFacts())


def write_jsonl(path: Path, rows: list[dict]) -> Path:
    path.write_text("".join(json.dumps(row) + "\n" for row in rows))
    return path


def test_text_chat_and_own_sampling_rows_become_prompts_with_counted_lengths(tmp_path, tokenizer):
    prompts = workload(write_jsonl(tmp_path / "rows.jsonl", ROWS), tokenizer).prompts()
    text, sampled, chat = prompts
    assert (text.text, text.sampling.max_new_tokens, text.item["category"]) == ("one two three", 5, "short")
    assert text.item["counted_input_tokens"] == 3 and text.sampling.ignore_eos
    assert sampled.sampling.max_new_tokens == 256  # the published default for a row that gives none
    assert (sampled.sampling.temperature, sampled.sampling.seed, sampled.sampling.top_p) == (0.5, 3, 1.0)
    assert chat.item["chat_messages"][0] == {"role": "system", "content": "be brief"}
    assert chat.text == "<system> be brief <user> six seven <assistant>"
    assert chat.item["counted_input_tokens"] == 7  # the rendered conversation, as the server reads it


@pytest.mark.parametrize("form", ["csv", "parquet", "saved"])
def test_csv_parquet_and_a_datasets_folder_give_the_same_prompts_as_jsonl(tmp_path, tokenizer, form):
    import datasets

    flat = [{"prompt": row.get("prompt"), "output_tokens": row.get("output_tokens"),
             "sampling": json.dumps(row["sampling"]) if "sampling" in row else None} for row in ROWS[:2]]
    if form == "csv":
        path = tmp_path / "rows.csv"
        pd.DataFrame(flat).to_csv(path, index=False)
    elif form == "parquet":
        path = tmp_path / "rows.parquet"
        pd.DataFrame(flat).to_parquet(path)
    else:
        path = tmp_path / "saved"
        datasets.Dataset.from_list(flat).save_to_disk(str(path))
    expected = workload(write_jsonl(tmp_path / "rows.jsonl", ROWS[:2]), tokenizer).prompts()
    got = workload(path, tokenizer).prompts()
    assert [(p.text, p.sampling) for p in got] == [(p.text, p.sampling) for p in expected]


def test_sharegpt_is_read_as_it_is_with_the_recorded_replies_as_output_lengths(tokenizer):
    loaded = workload(EXAMPLES / "example_sharegpt.json", tokenizer)
    first, tutor = loaded.prompts()
    reply = json.loads((EXAMPLES / "example_sharegpt.json").read_text())[0]["conversations"][1]["value"]
    assert first.sampling.max_new_tokens == len(reply.split())
    assert tutor.item["chat_messages"][0]["role"] == "system" and tutor.followups == ("Is 21 one of them?",)
    second = next_turn(tutor, "an answer")
    assert second.sampling.max_new_tokens == len("No: 21 is 3 times 7, so it has divisors other than one and itself.".split())
    assert next_turn(second, "x") is None
    assert [first.item["source_id"], tutor.item["source_id"], second.item["source_id"]] == ["sg-1", "sg-2", "sg-2"]
    assert [len(p.followups) for p in workload(EXAMPLES / "example_sharegpt.json", tokenizer, max_turns=1).prompts()] \
        == [0, 0]


def test_rows_of_one_conversation_id_are_its_turns_in_order(tmp_path, tokenizer):
    rows = [{"conversation_id": "c", "turn": 2, "prompt": "again", "output_tokens": 4},
            {"prompt": "alone"}, {"conversation_id": "c", "turn": 1, "prompt": "first", "output_tokens": 9}]
    opening, alone = workload(write_jsonl(tmp_path / "turns.jsonl", rows), tokenizer).prompts()
    assert (opening.item["row"], opening.item["source_id"], opening.followups) == (0, "c", ("again",))
    assert opening.sampling.max_new_tokens == 9 and next_turn(opening, "ok").sampling.max_new_tokens == 4
    assert opening.text == "<user> first <assistant>" and alone.text == "alone"


def test_column_names_are_options(tmp_path, tokenizer):
    rows = [{"question": "what now", "n": 3, "kind": "qa"}]
    prompt, = workload(write_jsonl(tmp_path / "own.jsonl", rows), tokenizer, prompt_column="question",
                       output_tokens_column="n", category_column="kind").prompts()
    assert (prompt.text, prompt.sampling.max_new_tokens, prompt.item["category"]) == ("what now", 3, "qa")


@pytest.mark.parametrize("rows, message", [
    ([{"prompt": "ok"}, {"output_tokens": 3}], r"row 1: prompt: give exactly one of the columns .*found none"),
    ([{"prompt": "a", "messages": [{"role": "user", "content": "b"}]}], r"row 0: prompt: .*found prompt, messages"),
    ([{"prompt": "a", "output_tokens": 0}], r"row 0: output_tokens: Input should be greater than or equal to 1"),
    ([{"prompt": "a", "sampling": {"min_p": 0.1}}], r"row 0: sampling\.min_p: Extra inputs are not permitted"),
    ([{"messages": [{"role": "user", "content": "a"}, {"role": "assistant", "content": "b"}]}],
     r"row 0: messages: the last message is the assistant's"),
    ([{"conversations": [{"from": "gpt", "value": "a"}]}], r"row 0: conversations\.0\.from: 'gpt' where a user"),
    ([{"conversation_id": "c", "turn": 1, "prompt": "a"}, {"conversation_id": "c", "turn": 3, "prompt": "b"}],
     r"row 1: turn: turn 3 of conversation 'c' where turn 2 belongs"),
    ([{"conversation_id": "c", "prompt": "a"}], r"row 0: turn: a multi-turn row gives both"),
    ([], r"has no rows"),
])
def test_a_row_that_does_not_fit_is_refused_in_one_line_naming_it(tmp_path, tokenizer, rows, message):
    with pytest.raises(SparkbenchError, match=message) as error:
        workload(write_jsonl(tmp_path / "bad.jsonl", rows), tokenizer)
    assert "\n" not in str(error.value)


def test_a_row_longer_than_the_servers_context_is_refused_by_its_row(tmp_path, tokenizer):
    rows = [{"prompt": "short"}, {"prompt": " ".join(["word"] * 40), "output_tokens": 10}]
    loaded = workload(write_jsonl(tmp_path / "long.jsonl", rows), tokenizer, output_tokens=4)
    loaded.check_fits(50)  # 40 + 10 fit exactly
    with pytest.raises(SparkbenchError, match=r"row 1: prompt: 40 prompt tokens \+ 10 new tokens .* 49-token"):
        loaded.check_fits(49)


def test_a_conversation_needs_the_template_on_text_endpoints_but_not_through_the_chat_api(tmp_path):
    bare = tokenizer_folder(tmp_path / "bare", template=False)
    path = write_jsonl(tmp_path / "chat.jsonl", ROWS)
    with pytest.raises(SparkbenchError, match="dataset row 2 is a conversation .*--chat"):
        workload(path, bare)
    chat = workload(path, bare, chat=True).prompts()[2]
    assert chat.text == "six seven" and chat.item["counted_input_tokens"] is None  # the server renders it
    assert len(workload(path, bare, num_prompts=2).prompts()) == 2  # text rows alone need no template


def test_without_a_tokenizer_the_workload_says_how_to_give_one(tmp_path):
    with pytest.raises(SparkbenchError, match="no tokenizer.json .*--tokenizer DIR"):
        workload(write_jsonl(tmp_path / "rows.jsonl", ROWS), tmp_path / "nowhere")


def test_a_name_not_in_the_local_cache_is_refused_without_a_download(monkeypatch, tmp_path):
    monkeypatch.setenv("HF_HOME", str(tmp_path / "hf"))
    with pytest.raises(SparkbenchError, match="not in the local Hugging Face cache"):
        build("dataset", {"path": "someone/no-such-dataset"}, reduced=False, model_dir=None)


@pytest.mark.parametrize("name, text, message", [
    ("broken.jsonl", '{"prompt": "a"}\n{"prompt": \n', r"broken\.jsonl line 2, column 12: not JSON \(Expecting value\)"),
    ("words.jsonl", '{"prompt": "a"}\n\nnot json at all\n{"prompt": "b"}\n', r"words\.jsonl line 3, column 1: not JSON"),
    ("list.jsonl", '{"prompt": "a"}\n["a", "b"]\n', r"list\.jsonl line 2, column 1: a JSON list, not an object"),
    ("whole.json", '[{"prompt": "a"},\n {"prompt" "b"}]\n', r"whole\.json line 2, column 12: not JSON"),
])
def test_a_line_that_is_not_json_is_one_line_naming_its_line_and_column(tmp_path, capfd, name, text, message):
    path = tmp_path / name
    path.write_text(text)
    with pytest.raises(SparkbenchError, match=rf"^dataset .*{message}") as error:
        build("dataset", {"path": str(path)}, reduced=False, model_dir=None)
    assert "\n" not in str(error.value)
    assert capfd.readouterr() == ("", "")  # the refusal is the only line: nothing of the reader's own


def test_the_spec_records_the_files_sha256_rows_and_options_so_other_data_is_another_shape(tmp_path, tokenizer):
    first = write_jsonl(tmp_path / "a.jsonl", ROWS)
    other = write_jsonl(tmp_path / "b.jsonl", ROWS[:2])
    spec = workload(first, tokenizer).spec()
    assert spec["data_sha256"] == hashlib.sha256(first.read_bytes()).hexdigest()
    assert (spec["num_rows"], spec["num_prompts"], spec["columns"]["prompt"]) == (3, 3, "prompt")

    def run(path: Path, **options) -> Run:
        return Run("/nowhere", {"run_id": "r", "workload": workload(path, tokenizer, **options).spec()})

    copy = tmp_path / "copy.jsonl"
    copy.write_bytes(first.read_bytes())
    assert shape_key(run(first)) == shape_key(run(copy))  # the same bytes elsewhere: the same workload
    assert shape_key(run(first)) != shape_key(run(other))
    assert shape_key(run(first)) != shape_key(run(first, max_turns=1))
    assert shape_text(run(first)) == "dataset: output lengths per row, greedy"


def test_a_run_without_a_path_is_refused_before_any_server_starts():
    from workloads.registry import config_of

    with pytest.raises(SparkbenchError, match="dataset options: path: give --path FILE"):
        config_of("dataset", {})
