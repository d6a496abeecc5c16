"""Multi-turn conversations: the chat template, the next turn built from the answer, and the runner
sending each next turn after the previous one is recorded, linked and with its own timings."""

from __future__ import annotations

import json

import pytest

from harness.chat import conversation_prompt, load_template, next_turn, render, turn_ids
from harness.engines.base import ServerHTTPError, StreamResult
from harness.errors import SparkbenchError
from harness.records.requests import read_jsonl
from harness.records.rundir import RunDir
from harness.run.runner import RunAborted, RunOptions, execute
from harness.spec import SamplingParams

TEMPLATE = ("{{ bos_token }}{% for m in messages %}<|{{ m['role'] }}|>\n{{ m['content'] }}{{ eos_token }}\n"
            "{% endfor %}{% if add_generation_prompt %}<|assistant|>\n{% endif %}")
SAMPLING = SamplingParams(max_new_tokens=4)


@pytest.fixture
def template(tmp_path):
    (tmp_path / "tokenizer_config.json").write_text(json.dumps(
        {"chat_template": TEMPLATE, "bos_token": "<s>", "eos_token": {"content": "</s>"}}))
    return load_template(tmp_path)


def test_the_template_renders_the_conversation_with_the_assistant_turn_open(template):
    text = render(template, [{"role": "user", "content": "hi"}])
    assert text == "<s><|user|>\nhi</s>\n<|assistant|>\n"


def test_a_template_file_wins_over_the_tokenizer_config(tmp_path, template):
    (tmp_path / "chat_template.jinja").write_text("[{{ messages[0]['content'] }}]")
    assert render(load_template(tmp_path), [{"role": "user", "content": "x"}]) == "[x]"


def test_a_folder_without_a_template_is_a_one_line_error(tmp_path):
    with pytest.raises(SparkbenchError, match="no chat template in .*--tokenizer DIR"):
        load_template(tmp_path)


def test_the_second_turn_carries_the_first_answer_and_links_back(template):
    first = conversation_prompt("q-1", SAMPLING, ["first?", "second?"], template, {"category": "mt_bench"})
    second = next_turn(first, "ANSWER")
    assert second.prompt_id == "q-1/turn2" and second.item["previous_prompt_id"] == "q-1"
    assert second.item["turn"] == 2 and second.item["conversation_id"] == "q-1"
    assert second.item["category"] == "mt_bench"
    assert [m["role"] for m in second.item["chat_messages"]] == ["user", "assistant", "user"]
    assert second.text == "<s><|user|>\nfirst?</s>\n<|assistant|>\nANSWER</s>\n<|user|>\nsecond?</s>\n<|assistant|>\n"
    assert next_turn(second, "again") is None
    assert turn_ids(first) == ["q-1", "q-1/turn2"]


def test_without_a_template_the_text_is_the_user_turn_and_the_messages_go_to_the_chat_api():
    first = conversation_prompt("q", SAMPLING, ["a", "b"], None, {})
    second = next_turn(first, "x")
    assert (first.text, second.text) == ("a", "b")
    assert second.item["chat_messages"][-2:] == [{"role": "assistant", "content": "x"}, {"role": "user", "content": "b"}]


class EchoBackend:
    """Answers each prompt with text naming it; fails the prompts listed."""

    name = engine = "sglang"

    def __init__(self, fail: set[str] = frozenset()) -> None:
        self.fail, self.sent = fail, []

    async def send(self, http, base_url, prompt, deadlines=None):
        self.sent.append((prompt.prompt_id, prompt.text))
        if prompt.prompt_id in self.fail:
            return StreamResult(sent_unix_s=0.0, sent_ns=1).fail(ServerHTTPError("boom"), 2)
        start = 10 * len(self.sent)
        return StreamResult(sent_unix_s=0.0, sent_ns=start, end_ns=start + 4, first_token_ns=start + 1,
                            last_token_ns=start + 3, chunk_ns=[start + 1, start + 3], chunk_tokens=[1, 2],
                            completion_tokens=2, prompt_tokens=3, text=f"answer to {prompt.prompt_id}",
                            finish_reason="length", received_bytes=64)

    def snapshot(self, http, base_url):
        return {}

    async def counters(self, http, base_url):
        return None

    async def flush_prefix_cache(self, http, base_url):
        return "flushed"


class Conversations:
    name = "talk"

    def prompts(self):
        return [conversation_prompt(f"c{i}", SAMPLING, ["one", "two", "three"] if i == 0 else ["only"], None, {})
                for i in range(3)]

    def warmup_prompts(self, count):
        return []

    def spec(self):
        return {"name": self.name}


def _execute(tmp_path, backend, concurrency=1, done=frozenset()):
    run = RunDir.create(tmp_path, "run", {"workload": {"name": "talk"}})
    options = RunOptions(base_url="http://x", warmup=0, concurrency=concurrency, show_progress=False,
                         power_sample_ms=0)
    execute(backend, options, Conversations(), run, done)
    return read_jsonl(run.path / "requests.jsonl").set_index("prompt_id")


@pytest.mark.parametrize("concurrency", [1, 3])
def test_each_turn_is_sent_after_the_answer_before_it_and_recorded_on_its_own(tmp_path, concurrency):
    backend = EchoBackend()
    records = _execute(tmp_path, backend, concurrency)
    sent = [pid for pid, _ in backend.sent]
    assert sent.index("c0") < sent.index("c0/turn2") < sent.index("c0/turn3")
    assert dict(backend.sent)["c0/turn3"] == "three"
    third = json.loads(records.loc["c0/turn3", "item_json"])
    assert third["chat_messages"][3] == {"role": "assistant", "content": "answer to c0/turn2"}
    assert third["previous_prompt_id"] == "c0/turn2" and third["turn"] == 3
    # Turn k of the prompt issued as seq s is seq s + (k - 1) * 3 prompts; each has its own stamps.
    assert records.loc[["c0", "c0/turn2", "c0/turn3"], "seq"].tolist() == [0, 3, 6]
    assert records.loc[["c0", "c1", "c2"], "seq"].tolist() == [0, 1, 2]
    assert records["sent_ns"].is_unique


def test_a_failed_turn_ends_its_conversation_and_the_run_goes_on(tmp_path):
    records = _execute(tmp_path, EchoBackend(fail={"c0/turn2"}))
    assert records.loc["c0/turn2", "status"] == "error"
    assert "c0/turn3" not in records.index and {"c1", "c2"} <= set(records.index)


def test_a_resumed_run_sends_again_every_conversation_with_a_turn_missing(tmp_path):
    backend = EchoBackend()
    _execute(tmp_path, backend, done=frozenset({"c0", "c0/turn2", "c1"}))
    assert [pid for pid, _ in backend.sent] == ["c0", "c0/turn2", "c0/turn3", "c2"]


@pytest.mark.parametrize(("source", "said"), [
    ("{% for m in messages %}{{ m['content'] }}", "not valid Jinja"),
    ("{% for i in range(10**9) %}x{% endfor %}", "Range too big"),
    ("{% for i in range(99999) %}{% for j in range(99999) %}turn{% endfor %}{% endfor %}", "renders more than"),
    ("{{ messages[0].content.no_such_method() }}", "failed to render"),
])
def test_a_template_that_cannot_render_is_a_one_line_error(source, said):
    template = {"source": source, "bos_token": "", "eos_token": ""}
    with pytest.raises(SparkbenchError, match=said) as caught:
        render(template, [{"role": "user", "content": "hi"}])
    assert "\n" not in str(caught.value)


def test_a_stopped_multi_turn_run_counts_turns_and_conversations_apart(tmp_path):
    run = RunDir.create(tmp_path, "run", {"workload": {"name": "talk"}})
    options = RunOptions(base_url="http://x", warmup=0, show_progress=False, power_sample_ms=0, max_errors=0)
    with pytest.raises(RunAborted, match=r"after 5 of 5 requests in 3 conversations"):
        execute(EchoBackend(fail={"c2"}), options, Conversations(), run)
