"""The Spec-Bench workload: the vendored data, the selection of tasks, conversations, and its spec."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

import pytest

from harness.engines.registry import engine_named
from harness.errors import SparkbenchError
from harness.facts import EngineFacts
from workloads.registry import build, config_of
from workloads.specbench import (
    DATA_FILE,
    MT_BENCH,
    PUBLISHED_MAX_NEW_TOKENS,
    TASKS,
    SpecBenchWorkload,
    load_questions,
    select,
    tokenizer_folder,
)

TEMPLATE = {"source": "{% for m in messages %}[{{ m['role'] }}] {{ m['content'] }}\n{% endfor %}[assistant]",
            "bos_token": "", "eos_token": ""}


def test_the_vendored_file_is_the_published_one_with_its_license():
    questions = load_questions()
    assert len(questions) == 480
    tasks = Counter(MT_BENCH if q["category"] not in TASKS else q["category"] for q in questions)
    assert tasks == dict.fromkeys(TASKS, 80)
    assert sum(len(q["turns"]) == 2 for q in questions) == 80
    assert "Apache License" in (DATA_FILE.parent / "LICENSE").read_text()


def test_a_changed_data_file_is_refused(tmp_path):
    copy = tmp_path / "question.jsonl"
    copy.write_bytes(DATA_FILE.read_bytes() + b"\n")
    with pytest.raises(SparkbenchError, match="has sha256"):
        load_questions(copy)


def test_tasks_and_mt_bench_categories_select_questions_in_file_order():
    questions = load_questions()
    two_each = select(questions, TASKS, 2)
    assert Counter(MT_BENCH if q["category"] not in TASKS else q["category"] for q in two_each) == dict.fromkeys(TASKS, 2)
    coding = select(questions, ("coding", "qa"), None)
    assert Counter(q["category"] for q in coding) == {"coding": 10, "qa": 80}


def test_categories_come_as_a_list_or_comma_separated():
    assert config_of("specbench", {"categories": "qa, writing"}).categories == ("qa", "writing")
    assert config_of("specbench", {"categories": ["rag"]}).categories == ("rag",)


def test_unknown_categories_fail_in_one_line_before_anything_runs():
    with pytest.raises(SparkbenchError, match="unknown categories chess"):
        config_of("specbench", {"categories": ["qa", "chess"]})


def test_published_and_reduced_scales():
    published = build("specbench", {}, reduced=False, model_dir=None).config
    reduced = build("specbench", {}, reduced=True, model_dir=None).config
    assert (published.per_task, published.max_new_tokens) == (None, PUBLISHED_MAX_NEW_TOKENS)
    assert reduced.per_task is not None and reduced.max_new_tokens < PUBLISHED_MAX_NEW_TOKENS


def test_each_question_is_a_greedy_conversation_with_its_task_and_category():
    workload = SpecBenchWorkload(template=TEMPLATE, categories=("writing", "translation"), per_task=1,
                                 max_new_tokens=1024)
    first, translation = workload.prompts()
    assert first.item["category"] == MT_BENCH and first.item["subcategory"] == "writing"
    assert len(first.followups) == 1 and translation.followups == ()
    assert first.text.startswith("[user] Compose") and first.text.endswith("[assistant]")
    assert first.sampling.temperature == 0.0 and first.sampling.max_new_tokens == 1024
    spec = workload.spec()
    assert (spec["num_prompts"], spec["num_turns"]) == (2, 3)


def test_warm_up_conversations_are_never_measured_questions():
    workload = SpecBenchWorkload(template=None, per_task=1)
    measured = {p.text for p in workload.prompts()}
    warmups = workload.warmup_prompts(2)
    assert len(warmups) == 2 and not measured & {p.text for p in warmups}


def test_the_template_comes_from_the_served_models_folder(tmp_path):
    (tmp_path / "tokenizer_config.json").write_text(json.dumps({"chat_template": TEMPLATE["source"]}))
    said = {"sglang": {"server_info": {"tokenizer_path": str(tmp_path)}},  # what each server's snapshot says,
            "vllm": {"models": {"data": [{"root": "/m"}]}},  # read by its adapter
            "llamacpp": {"props": {"model_path": "/g/model.gguf"}}}
    folders = {engine: tokenizer_folder(engine_named(engine).facts(snapshot), None) for engine, snapshot in said.items()}
    assert folders == {"sglang": tmp_path, "vllm": Path("/m"), "llamacpp": Path("/g")}
    workload = build("specbench", {}, reduced=True, model_dir=tmp_path).make(EngineFacts())
    assert workload.template["source"] == TEMPLATE["source"]


def test_without_a_template_and_without_the_chat_api_the_run_is_refused():
    plan = build("specbench", {}, reduced=True, model_dir=None)
    with pytest.raises(SparkbenchError, match="--tokenizer DIR, or --chat"):
        plan.make(EngineFacts())
    assert build("specbench", {"chat": True}, reduced=True, model_dir=None).make(EngineFacts()).template is None
