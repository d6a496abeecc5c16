"""Each tool's speculative acceptance, imported, against the server's own counters and sparkbench's
figure under the matching definition: SGLang's `bench_serving` (`--backend sglang`, which reads the
server's `avg_spec_accept_length`) against the pooled NGRAM SGLang server of the real model, and
`vllm bench serve`'s function (its counter deltas from /metrics) against the pooled n-gram vLLM
server, each beside a sparkbench run of the same shape on the same server.

Known in advance, from the sources (docs/imports.md, docs/metrics.md):
- vLLM's tool: `1 + Δaccepted / Δdrafts` and `100 Δaccepted / Δdraft_tokens` of the server's counters
  over its measured requests: exactly what the test reads from /metrics around the tool's run, and
  sparkbench's `mean_acceptance_length_token_weighted` (per-request `num_spec_steps`) equals its own
  counter figure over its run (`accept_length_server_counters`).
- SGLang's tool: the server's lifetime average since its last /flush_cache (`--flush-cache` flushes
  after the tool's warm-up, here none), `tokens / decode steps`, but only over whole windows of
  `decode_log_interval` (40) decode batches: with R decode steps it covers the first S = 40 * (R // 40),
  each step made 1 .. K tokens (K = speculative_num_draft_tokens), so the figure lies in an interval the
  counts fix; sparkbench's `mean_acceptance_length_token_weighted` (`1 + Σa / Σr`) is the same
  definition over every step, and the server's figure after sparkbench's run (it flushes after its
  warm-up too) lies in the same kind of interval around it, and is exactly what sparkbench's stream
  gives step by step over the same windows.
"""

from __future__ import annotations

import json
import math

import httpx
import numpy as np
import pytest

from harness.analysis.run import Run
from harness.engines.prometheus import (
    accept_length_from_counters,
    counter_delta,
    metric_total,
    parse_metrics,
    spec_decode_counters,
)
from harness.metrics.along_output import steps_are_chunks
from harness.testbed.envs import env_python
from tests.e2e.conftest import only_run_dir, sparkbench, synthetic_args
from tests.e2e.test_imports import VLLM_BENCH, imported, tool

# 4 x 32 tokens: SGLang's figure exists only after 40 decode steps since the flush, and NGRAM makes
# 1 to 4 tokens a step, so 4 requests of 31 decode tokens give 31 to 124 steps: at least 40 unless
# nearly every step lands 3 drafts.
PROMPTS, INPUT, OUTPUT = 4, 32, 32
LOG_INTERVAL = 40  # SGLang's default decode_log_interval; the pooled profile does not set it
SGLANG_COUNTERS = ("sglang:generation_tokens_total", "sglang:spec_verify_calls_total")


def server_info(base_url: str) -> dict:
    return httpx.get(base_url + "/server_info", timeout=30).json()


def sglang_counters(base_url: str) -> dict[str, float]:
    samples = parse_metrics(httpx.get(base_url + "/metrics", timeout=30).text, SGLANG_COUNTERS)
    return {name: metric_total(samples, name) or 0.0 for name in SGLANG_COUNTERS}


def vllm_counters(base_url: str) -> dict[str, float]:
    return spec_decode_counters(httpx.get(base_url + "/metrics", timeout=30).text, "vllm:") or {}


def figure(run: Run, metric: str, stat: str = "value") -> float:
    rows = run.summary[(run.summary["metric"] == metric) & (run.summary["stat"] == stat)]
    assert len(rows) == 1, (metric, stat, sorted(set(run.summary["metric"])))
    return float(rows["value"].iloc[0])


def windowed_interval(tokens_low: float, tokens_high: float, steps: float, k: int) -> tuple[float, float, int]:
    """Where SGLang's windowed average of `steps` decode steps that made between `tokens_low` and
    `tokens_high` tokens in all can lie: the last `steps - S` steps, left out, made 1 .. k tokens each."""
    covered = LOG_INTERVAL * int(steps // LOG_INTERVAL)
    tail = steps - covered
    return (tokens_low - k * tail) / covered, (tokens_high - tail) / covered, covered


@pytest.fixture(scope="module")
def sglang(real_sglang_ngram_server, tmp_path_factory):
    server = real_sglang_ngram_server
    folder = tmp_path_factory.mktemp("sglang-accept")
    before = sglang_counters(server.base_url)
    tool([str(env_python("sglang")), "-m", "sglang.bench_serving", "--backend", "sglang", "--base-url",
          server.base_url, "--model", server.model_dir.name, "--tokenizer", str(server.model_dir), "--dataset-name",
          "random-ids", "--random-input-len", str(INPUT), "--random-output-len", str(OUTPUT), "--random-range-ratio",
          "1", "--num-prompts", str(PROMPTS), "--max-concurrency", "1", "--warmup-requests", "0", "--flush-cache",
          "--output-file", str(folder / "sglang.jsonl"), "--disable-tqdm"], folder)
    after_tool = server_info(server.base_url)
    delta = {name: value - before[name] for name, value in sglang_counters(server.base_url).items()}
    ours = sparkbench(*synthetic_args(server, folder / "sparkbench", PROMPTS, INPUT, OUTPUT))
    assert ours.returncode == 0, ours.stderr
    after_ours = server_info(server.base_url)
    result = json.loads((folder / "sglang.jsonl").read_text().splitlines()[-1])
    return {"import": imported(folder / "sglang.jsonl", folder / "import"), "result": result, "delta": delta,
            "after_tool": after_tool, "after_ours": after_ours, "ours": Run.load(only_run_dir(folder / "sparkbench")),
            "k": int(after_tool["speculative_num_draft_tokens"])}


@pytest.fixture(scope="module")
def vllm(real_vllm_ngram_server, tmp_path_factory):
    server = real_vllm_ngram_server
    folder = tmp_path_factory.mktemp("vllm-accept")
    before = vllm_counters(server.base_url)
    tool([str(env_python("vllm")), "-c", VLLM_BENCH, "--base-url", server.base_url, "--model", server.model_dir.name,
          "--tokenizer", str(server.model_dir), "--dataset-name", "random", "--random-input-len", str(INPUT),
          "--random-output-len", str(OUTPUT), "--num-prompts", str(PROMPTS), "--max-concurrency", "1",
          "--ignore-eos", "--temperature", "0", "--save-result", "--result-dir", str(folder),
          "--result-filename", "vllm.json", "--disable-tqdm"], folder)
    after = vllm_counters(server.base_url)
    ours = sparkbench(*synthetic_args(server, folder / "sparkbench", PROMPTS, INPUT, OUTPUT))
    assert ours.returncode == 0, ours.stderr
    return {"import": imported(folder / "vllm.json", folder / "import"),
            "result": json.loads((folder / "vllm.json").read_text()), "delta": counter_delta(before, after),
            "ours": Run.load(only_run_dir(folder / "sparkbench"))}


def _steps_and_figure(run: Run) -> tuple[float, float]:
    return float(run.measured["verify_rounds"].sum()), figure(run, "mean_acceptance_length_token_weighted")


def test_sglang_accept_length_is_imported_and_lies_where_the_servers_counts_put_it(sglang):
    run, result, delta, k = sglang["import"], sglang["result"], sglang["delta"], sglang["k"]
    tools = figure(run, "accept_length", "tool_value")
    assert "avg_spec_accept_length" in run.record.imported.definitions["accept_length"]
    # the very figure the server holds after the tool's run (the tool read it there)
    assert tools == pytest.approx(sglang["after_tool"]["internal_states"][0]["avg_spec_accept_length"], rel=1e-12)
    steps, tokens = delta["sglang:spec_verify_calls_total"], delta["sglang:generation_tokens_total"]
    assert tokens == result["total_output_tokens"] == PROMPTS * OUTPUT and steps >= LOG_INTERVAL
    # decode tokens: the output less each request's prefill token, and at most k - 1 tokens a request
    # accepted past its cap in its last step
    low, high, covered = windowed_interval(tokens - PROMPTS, tokens - PROMPTS + PROMPTS * (k - 1), steps, k)
    print(f"\nsglang bench_serving accept_length {tools:.4f}: {steps:.0f} decode steps, {covered} covered, "
          f"{tokens:.0f} tokens; the counts allow [{low:.4f}, {high:.4f}]; "
          f"over every step {(tokens - PROMPTS) / steps:.4f}")
    assert low - 1e-9 <= tools <= high + 1e-9


def windowed_from_the_stream(run: Run) -> float | None:
    """SGLang's own windowed figure for sparkbench's requests, step by step: at concurrency 1 the decode
    steps after the flush are the requests' verify steps in the order sent; each chunk after the first
    brought one step's tokens (SGLang streams so), and the last step of a request counts what the server
    counted (`accepted drafts + rounds` less the earlier steps), cap or not. None when some request's
    chunks are not its steps (a stream merged under load)."""
    rows = run.measured.sort_values("sent_ns")
    if not steps_are_chunks(rows).all():
        return None
    steps: list[float] = []
    for counts, accepted, rounds in zip(rows["chunk_tokens"], rows["accepted_draft_tokens"], rows["verify_rounds"]):
        made = list(np.diff(np.asarray(counts, dtype=float)))
        steps += made[:-1] + [accepted + rounds - sum(made[:-1])]
    covered = LOG_INTERVAL * (len(steps) // LOG_INTERVAL)
    return sum(steps[:covered]) / covered if covered else None


def test_sparkbench_matching_figure_agrees_with_sglangs_own_figure_for_its_requests(sglang):
    """The server's figure after sparkbench's run covers sparkbench's requests (it flushed after its
    warm-up): the same definition as sparkbench's 1 + Σa / Σr, windowed as the server counts. From the
    stream, step by step, it is exactly the server's; from the counts alone, within their interval."""
    ours, k = sglang["ours"], sglang["k"]
    steps, matching = _steps_and_figure(ours)
    servers = sglang["after_ours"]["internal_states"][0]["avg_spec_accept_length"]
    low, high, covered = windowed_interval(matching * steps, matching * steps, steps, k)
    exact = windowed_from_the_stream(ours)
    print(f"\nsparkbench mean_acceptance_length_token_weighted {matching:.4f} over {steps:.0f} steps; the server's "
          f"avg_spec_accept_length after it {servers:.4f} over {covered}; from sparkbench's stream, windowed: "
          f"{exact}; the counts allow [{low:.4f}, {high:.4f}]; sglang bench_serving's over its own requests "
          f"{figure(sglang['import'], 'accept_length', 'tool_value'):.4f}")
    assert low - 1e-9 <= servers <= high + 1e-9
    if exact is not None:
        assert servers == pytest.approx(exact, rel=1e-9)


def test_vllm_acceptance_is_imported_and_is_the_servers_counters_over_its_run(vllm):
    run, delta = vllm["import"], vllm["delta"]
    length, rate = figure(run, "spec_decode_acceptance_length", "tool_value"), figure(
        run, "spec_decode_acceptance_rate", "tool_value")
    assert "1 + accepted / drafts" in run.record.imported.definitions["spec_decode_acceptance_length"]
    assert delta["drafts"] > 0
    assert figure(run, "spec_decode_num_drafts", "tool_value") == delta["drafts"]
    assert figure(run, "spec_decode_accepted_tokens", "tool_value") == delta["accepted_tokens"]
    assert length == pytest.approx(accept_length_from_counters(delta), rel=1e-12)
    assert rate == pytest.approx(100 * delta["accepted_tokens"] / delta["draft_tokens"], rel=1e-12)
    positions = [figure(run, "spec_decode_per_position_acceptance_rate", f"position_{k}")
                 for k in range(1, 1 + sum(key.startswith("accepted_tokens_pos_") for key in delta))]
    assert positions == pytest.approx([delta[f"accepted_tokens_pos_{k}"] / delta["drafts"]
                                       for k in range(len(positions))], rel=1e-12)


def test_sparkbench_matching_figures_are_the_servers_counters_over_its_run(vllm):
    ours, run = vllm["ours"], vllm["import"]
    matching = figure(ours, "mean_acceptance_length_token_weighted")
    counters = figure(ours, "accept_length_server_counters")
    rate = figure(ours, "draft_acceptance_rate_token_weighted")
    tools = figure(run, "spec_decode_acceptance_length", "tool_value")
    print(f"\nvllm bench serve spec_decode_acceptance_length {tools:.4f}, acceptance_rate "
          f"{figure(run, 'spec_decode_acceptance_rate', 'tool_value'):.2f}% over its requests; sparkbench "
          f"mean_acceptance_length_token_weighted {matching:.4f}, accept_length_server_counters {counters:.4f}, "
          f"draft_acceptance_rate_token_weighted {rate:.4f} over its own")
    assert math.isfinite(matching) and matching == pytest.approx(counters, rel=1e-12)
    drafted = ours.measured
    assert rate == pytest.approx(drafted["accepted_draft_tokens"].sum() / drafted["proposed_draft_tokens"].sum())
