"""Length mixes, shared prefixes and traces with lengths on the session's real servers: SGLang's
native API replays a trace's input lengths with drawn output lengths, and serves a shared-prefix
run's prefixes from its radix cache; vLLM's OpenAI API does the same from its prefix cache, its
/metrics hit counters agreeing with its per-request counts. Every length is checked against the
server's own count of it, every hit against the server's own `cached_tokens`."""

from __future__ import annotations

import json

import pytest

from harness.analysis.run import Run
from tests.e2e.conftest import only_run_dir, sparkbench

# vLLM caches whole blocks of 128 tokens (its CPU build's block size), SGLang single tokens: a
# prefix of two blocks is served whole by both.
PREFIX, QUESTION, OUTPUT = 256, 16, 8
GROUPS, MEMBERS = 2, 2
TRACE_INPUTS = (24, 40, 12)


def _run(server, results, *args: str) -> Run:
    done = sparkbench("run", *args, "--server", server.base_url, "--tokenizer", str(server.model_dir), "--warmup",
                      "1", "--results", str(results), "--no-progress", "--scrape-interval", "0.2")
    assert done.returncode == 0, done.stderr
    return Run.load(only_run_dir(results))


def _shared_prefix(server, results) -> Run:
    return _run(server, results, "shared-prefix", "--num-groups", str(GROUPS), "--prompts-per-group", str(MEMBERS),
                "--prefix-tokens", str(PREFIX), "--question-tokens", str(QUESTION), "--output-tokens", str(OUTPUT))


def _value(run: Run, metric: str) -> float:
    rows = run.summary[(run.summary["metric"] == metric) & (run.summary["stat"] == "value")]
    return float(rows["value"].iloc[0])


def _hits_follow_the_groups(run: Run) -> None:
    """Each group's first prompt finds no prefix of its own in the cache; every later one finds the
    whole prefix and no more (its question opens with a token of its own)."""
    records = run.requests.sort_values("seq")
    assert (records["status"] == "ok").all()
    assert records["prompt_tokens"].tolist() == [PREFIX + QUESTION] * GROUPS * MEMBERS  # the server's count
    seen: set[int] = set()
    for raw, cached in zip(records["item_json"], records["cached_tokens"]):
        group = json.loads(raw)["prefix_group"]
        assert (cached < PREFIX) if group not in seen else (PREFIX <= cached < PREFIX + QUESTION), (group, cached)
        seen.add(group)
    expected = records["cached_tokens"].sum() / records["prompt_tokens"].sum()
    assert _value(run, "prefix_cache_hit_rate") == pytest.approx(expected)
    assert run.record.workload.requires_uncached_prompts is False


@pytest.fixture(scope="module")
def traced(sglang_server, tmp_path_factory) -> Run:
    """Three requests of a trace's input lengths on /generate, each output length drawn."""
    folder = tmp_path_factory.mktemp("trace")
    trace = folder / "trace.csv"
    trace.write_text("offset_s,input_tokens\n" + "".join(f"{0.1 * i:.1f},{n}\n" for i, n in enumerate(TRACE_INPUTS)),
                     encoding="utf-8")
    return _run(sglang_server, folder / "runs", "synthetic", "--schedule", str(trace), "--output-len-dist",
                "uniform:4,12", "--seed", "3")


def test_a_trace_is_replayed_with_its_lengths_and_drawn_outputs_as_the_server_counts_them(traced):
    records = traced.requests.sort_values("seq")
    items = [json.loads(raw) for raw in records["item_json"]]
    assert (records["status"] == "ok").all() and traced.record.api == "sglang"
    assert records["prompt_tokens"].tolist() == list(TRACE_INPUTS)  # the server's count of each prompt
    assert records["completion_tokens"].tolist() == [item["output_tokens"] for item in items]  # ignore_eos
    assert all(4 <= item["output_tokens"] <= 12 for item in items)
    assert (records["scheduled_ns"].diff().dropna() / 1e8).round().tolist() == [1.0, 1.0]
    spec = traced.record.workload.as_recorded()
    assert spec["output_len_dist"] == "uniform:4,12" and spec["trace_sha256"]
    assert _value(traced, "prefix_cache_hit_rate") == 0.0  # flushed after warm-up, distinct first tokens


def test_sglang_serves_the_shared_prefixes_from_its_cache(sglang_server, tmp_path):
    run = _shared_prefix(sglang_server, tmp_path)
    _hits_follow_the_groups(run)


def test_vllm_serves_them_and_its_counters_agree_with_its_per_request_counts(vllm_server, tmp_path):
    run = _shared_prefix(vllm_server, tmp_path)
    assert run.record.api == "openai"
    _hits_follow_the_groups(run)
    assert _value(run, "prefix_cache_hit_rate_server") == pytest.approx(_value(run, "prefix_cache_hit_rate"),
                                                                        abs=0.05)
