"""GSM8K workload: vendored data integrity, the five-shot prompt, sampling and the recorded spec."""

from __future__ import annotations

import hashlib
import json
import re
import shutil
import sys
import types

import pytest

from harness.errors import SparkbenchError
from workloads.gsm8k import (
    DATA_DIR,
    EXPECTED_SHA256,
    NUM_SHOTS,
    QUESTION_TEMPLATE,
    STOP_STRINGS,
    GSM8KWorkload,
    draw_shot_ids,
    gold_answer,
    load_gsm8k,
    load_vendored,
)

# The shots of seed 1234 and the digest of the first prompt: any drift in the draw, the template or
# the data changes these, and with them every prompt of every earlier run.
SEED_1234_SHOT_IDS = [6374, 3610, 957, 61, 742]
SEED_1234_FIRST_PROMPT_SHA256 = "32680f263ba83280e98a8a24ceefed10a722a4cdcd9f4d78e93c45d43143ca66"


@pytest.fixture(scope="module")
def data():
    return load_vendored()


@pytest.fixture(scope="module")
def workload():
    return GSM8KWorkload()


@pytest.fixture(scope="module")
def prompts(workload):
    return workload.prompts()


def _sha256(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()


# --- data -------------------------------------------------------------------------------------------

def test_vendored_files_sit_with_license_and_source_note():
    for name in ("test.jsonl", "train.jsonl", "LICENSE", "SOURCE.md"):
        assert (DATA_DIR / name).is_file(), name
    assert "MIT" in (DATA_DIR / "LICENSE").read_text()


def test_hardcoded_checksums_are_the_ones_in_the_source_note():
    note = (DATA_DIR / "SOURCE.md").read_text()
    for split, digest in EXPECTED_SHA256.items():
        assert re.search(rf"{split}\.jsonl\s+{digest}", note), split


def test_vendored_data_loads_with_published_sizes(data):
    assert len(data.test) == 1319
    assert len(data.train) == 7473
    assert data.sha256 == EXPECTED_SHA256
    assert all("####" in row["answer"] for row in data.test + data.train)


def _copy_data(tmp_path):
    for name in ("test.jsonl", "train.jsonl"):
        shutil.copyfile(DATA_DIR / name, tmp_path / name)
    return tmp_path


def test_tampered_copy_fails_with_one_line(tmp_path):
    copy = _copy_data(tmp_path)
    path = copy / "test.jsonl"
    path.write_text(path.read_text().replace("#### 18", "#### 19", 1))
    with pytest.raises(SparkbenchError, match="sha256") as raised:
        load_vendored(copy)
    assert "\n" not in str(raised.value)


def test_missing_file_fails_with_one_line(tmp_path):
    copy = _copy_data(tmp_path)
    (copy / "train.jsonl").unlink()
    with pytest.raises(SparkbenchError, match="missing") as raised:
        load_vendored(copy)
    assert "\n" not in str(raised.value)


def test_unknown_source_is_refused():
    with pytest.raises(SparkbenchError):
        load_gsm8k("somewhere")
    with pytest.raises(SparkbenchError):
        GSM8KWorkload(source="somewhere")


def _fake_datasets(monkeypatch, load_dataset):
    module = types.ModuleType("datasets")
    module.load_dataset = load_dataset
    monkeypatch.setitem(sys.modules, "datasets", module)


def test_hub_failure_becomes_one_line_error(monkeypatch):
    def unreachable(*args, **kwargs):
        raise ConnectionError("Couldn't reach the hub\nretry later")

    _fake_datasets(monkeypatch, unreachable)
    with pytest.raises(SparkbenchError, match="openai/gsm8k.*ConnectionError") as raised:
        load_gsm8k("hub")
    assert "\n" not in str(raised.value)


def test_hub_rows_get_the_digest_of_the_vendored_serialization(monkeypatch, data):
    def load_dataset(name, config):
        assert (name, config) == ("openai/gsm8k", "main")
        return {"test": data.test, "train": data.train}

    _fake_datasets(monkeypatch, load_dataset)
    hub = GSM8KWorkload(source="hub", limit=2)
    assert hub.spec()["data_sha256"] == EXPECTED_SHA256
    assert [p.text for p in hub.prompts()] == [p.text for p in GSM8KWorkload(limit=2).prompts()]


# --- prompt builder ---------------------------------------------------------------------------------

def test_five_shots_from_train_never_from_test(workload, prompts, data):
    assert len(workload.shot_ids) == NUM_SHOTS == 5
    assert len(set(workload.shot_ids)) == 5
    test_questions = {row["question"] for row in data.test}
    text = prompts[0].text
    for shot in workload.shot_ids:
        row = data.train[shot]
        assert row["question"] not in test_questions
        assert f"Question: {row['question']}\nAnswer: {row['answer']}" in text
    assert text.count("Question: ") == 6
    assert text.count("####") == 5


def test_shots_are_joined_and_the_test_question_comes_last(workload, prompts, data):
    shots = [data.train[i] for i in workload.shot_ids]
    expected_prefix = "\n\n".join(f"Question: {r['question']}\nAnswer: {r['answer']}" for r in shots)
    for prompt in (prompts[0], prompts[-1]):
        question = data.test[prompt.item["question_index"]]["question"]
        assert prompt.text == f"{expected_prefix}\n\nQuestion: {question}\nAnswer:"
        assert prompt.text.endswith(QUESTION_TEMPLATE.format(question=question))


def test_shot_draw_is_pinned_for_the_default_seed(workload):
    assert workload.config.shot_seed == 1234
    assert workload.shot_ids == SEED_1234_SHOT_IDS
    assert draw_shot_ids(7473, 1234) == SEED_1234_SHOT_IDS


def test_same_seed_is_byte_identical_other_seed_differs(prompts):
    again = GSM8KWorkload().prompts()
    assert [p.text.encode() for p in again] == [p.text.encode() for p in prompts]
    other = GSM8KWorkload(shot_seed=4321, limit=1).prompts()[0]
    assert other.text != prompts[0].text
    assert other.text.endswith(prompts[0].text.rsplit("\n\n", 1)[-1])


def test_prompt_ids_items_and_gold(prompts, data):
    assert len(prompts) == 1319
    assert [p.prompt_id for p in prompts] == [f"gsm8k-{i}" for i in range(1319)]
    assert prompts[0].item == {"question_index": 0, "gold": "18"}
    assert all(p.item["gold"] == gold_answer(data.test[i]["answer"]) for i, p in enumerate(prompts))
    assert all("chat_messages" not in p.item and p.input_ids is None for p in prompts)


def test_gold_answer_keeps_the_number_as_written():
    assert gold_answer("a\nb #### 1,450,000") == "1,450,000"
    assert gold_answer("#### -3") == "-3"


def test_chat_option_wraps_the_same_text_as_one_user_message(prompts):
    chat = GSM8KWorkload(chat=True, limit=2).prompts()
    for plain, wrapped in zip(prompts, chat):
        assert wrapped.text == plain.text
        assert wrapped.item["chat_messages"] == [{"role": "user", "content": plain.text}]
        assert wrapped.item["gold"] == plain.item["gold"]


# --- selection and sampling -------------------------------------------------------------------------

def test_published_sampling_and_per_question_seed(prompts):
    first = prompts[0].sampling
    assert (first.temperature, first.top_p, first.top_k) == (0.6, 0.95, 29)
    assert first.max_new_tokens == 32_768
    assert first.ignore_eos is False
    assert first.stop == STOP_STRINGS == ("Question:", "</s>", "<|im_end|>", "<|endoftext|>")
    assert [p.sampling.seed for p in prompts[:3]] == [0, 1, 2]


def test_every_sampling_parameter_can_be_overridden():
    workload = GSM8KWorkload(temperature=0.0, top_p=1.0, top_k=-1, max_new_tokens=512,
                             ignore_eos=True, stop=("\n\n",), base_seed=100, offset=5, limit=1)
    sampling = workload.prompts()[0].sampling
    assert sampling.to_dict() == {"max_new_tokens": 512, "temperature": 0.0, "top_p": 1.0, "top_k": -1,
                                  "ignore_eos": True, "stop": ["\n\n"], "seed": 105}


def test_limit_offset_and_shuffle():
    assert [p.prompt_id for p in GSM8KWorkload(offset=10, limit=3).prompts()] == ["gsm8k-10", "gsm8k-11", "gsm8k-12"]
    assert len(GSM8KWorkload(offset=1300).prompts()) == 19
    shuffled = [p.item["question_index"] for p in GSM8KWorkload(shuffle=True, shuffle_seed=7).prompts()]
    assert sorted(shuffled) == list(range(1319)) and shuffled != list(range(1319))
    again = [p.item["question_index"] for p in GSM8KWorkload(shuffle=True, shuffle_seed=7, limit=5).prompts()]
    assert again == shuffled[:5]
    other = [p.item["question_index"] for p in GSM8KWorkload(shuffle=True, shuffle_seed=8, limit=5).prompts()]
    assert other != again


def test_bad_selection_is_refused():
    with pytest.raises(SparkbenchError):
        GSM8KWorkload(limit=-1)
    with pytest.raises(SparkbenchError):
        GSM8KWorkload(offset=-1)
    with pytest.raises(SparkbenchError):
        GSM8KWorkload(offset=1319).prompts()


def test_warmup_prompts_are_train_questions_that_are_not_shots(workload, prompts, data):
    warmup = workload.warmup_prompts(8)
    assert len(warmup) == 8
    shot_questions = {data.train[i]["question"] for i in workload.shot_ids}
    test_questions = {row["question"] for row in data.test}
    measured_ids = {p.prompt_id for p in prompts}
    for prompt in warmup:
        question = data.train[prompt.item["train_index"]]["question"]
        assert question not in shot_questions and question not in test_questions
        assert prompt.text.endswith(f"Question: {question}\nAnswer:")
        assert prompt.prompt_id not in measured_ids
    assert workload.warmup_prompts(0) == []


# --- spec -------------------------------------------------------------------------------------------

def test_spec_records_everything_needed_to_regenerate(workload):
    spec = workload.spec()
    json.dumps(spec)  # goes into the manifest as JSON
    assert spec["name"] == "gsm8k"
    assert spec["source"] == "vendored"
    assert spec["shot_seed"] == 1234
    assert spec["shot_ids"] == SEED_1234_SHOT_IDS
    assert spec["templates"] == {"shot": "Question: {question}\nAnswer: {answer}",
                                 "question": "Question: {question}\nAnswer:", "separator": "\n\n"}
    assert spec["data_sha256"] == EXPECTED_SHA256
    assert spec["sampling"]["top_k"] == 29 and spec["base_seed"] == 0
    assert (spec["limit"], spec["offset"], spec["shuffle"], spec["shuffle_seed"]) == (None, 0, False, 0)
    assert spec["chat"] is False
    assert spec["num_prompts"] == 1319


def test_first_prompt_is_pinned(prompts):
    assert _sha256(prompts[0].text) == SEED_1234_FIRST_PROMPT_SHA256
