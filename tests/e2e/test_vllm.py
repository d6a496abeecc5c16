"""The OpenAI-compatible backend against a real vLLM CPU server, with and without speculation."""

from __future__ import annotations

import json
from pathlib import Path

import httpx
import pandas as pd
import pytest

from tests.artifact_checks import accept_length_problems
from tests.e2e.conftest import only_run_dir, report_facts, sparkbench, synthetic_args

INPUT, OUTPUT, PROMPTS = 512, 128, 3
SPEC_COLUMNS = ["accept_length", "verify_rounds", "accepted_draft_tokens", "proposed_draft_tokens", "accept_rate"]


def _synthetic(server, results, *extra):
    done = sparkbench(*synthetic_args(server, results, PROMPTS, INPUT, OUTPUT, *extra))
    assert done.returncode == 0, done.stderr
    return only_run_dir(results)


def _derived(run_dir):
    from harness.metrics import derive_requests
    from harness.records.requests import load_requests

    return derive_requests(load_requests(run_dir))


@pytest.fixture(scope="module")
def ngram_run(vllm_ngram_server, tmp_path_factory):
    return _synthetic(vllm_ngram_server, tmp_path_factory.mktemp("ngram"))


@pytest.fixture(scope="module")
def plain_run(vllm_server, tmp_path_factory):
    return _synthetic(vllm_server, tmp_path_factory.mktemp("plain"))


def test_counts_come_from_usage_and_match_the_request(plain_run):
    table = pd.read_parquet(plain_run / "requests.parquet")
    manifest = json.loads((plain_run / "manifest.json").read_text())
    assert (manifest["engine"], manifest["api"]) == ("vllm", "openai")  # detected from the server's endpoints
    assert (table["completion_tokens"] == OUTPUT).all()
    assert (table["prompt_tokens"] == INPUT).all()
    assert (table["cached_tokens"] == 0).all()


def test_the_report_names_the_servers_version_and_model(plain_run, vllm_server, tmp_path):
    version = httpx.get(f"{vllm_server.base_url}/version").json()["version"]  # the server's own word
    facts = report_facts(plain_run, tmp_path)
    assert facts["server version"] == version
    assert Path(facts["model"]).resolve() == Path(vllm_server.model_dir).resolve()
    # Attached by URL, with no profile's flags: vLLM serves its speculative settings nowhere.
    assert facts["speculative decoding"] == "not exported"


def test_without_speculation_accept_columns_are_empty(plain_run):
    derived = _derived(plain_run)
    assert derived[SPEC_COLUMNS].isna().all().all()


def test_ngram_speculation_accept_length_matches_metrics_counters(ngram_run):
    derived = _derived(ngram_run)
    drafted = derived[derived["verify_rounds"] > 0]
    # A request whose context never repeated gets no n-gram draft, and so no accept length.
    assert len(drafted) >= 2 and (drafted["accept_length"] > 1.0).all() and accept_length_problems(derived) == []
    assert derived.loc[derived["verify_rounds"].isna(), "accept_length"].isna().all()
    assert (derived["completion_tokens"] == OUTPUT).all()
    summary = pd.read_csv(ngram_run / "summary.csv").set_index(["metric", "stat"])["value"]
    counters = summary[("accept_length_server_counters", "value")]
    token_weighted = summary[("accept_length_token_weighted", "value")]
    assert counters > 1.0
    assert abs(token_weighted - counters) / counters < 0.02


def test_multi_token_chunks_are_seen_under_speculation(ngram_run):
    derived = _derived(ngram_run)
    assert (derived["tokens_per_chunk"] > 1.0).any()
    # A stream the integrity rules flag has no chunk gaps (its chunks may merge steps): not counted.
    for row in derived[~derived["stream_flagged"].astype(bool)].itertuples():
        assert sum(row.chunk_gap_tokens) == row.completion_tokens - row.chunk_tokens[0]


def test_sglang_and_vllm_tables_have_identical_columns(plain_run, sglang_server, tmp_path):
    sglang_run = _synthetic(sglang_server, tmp_path)
    vllm_derived, sglang_derived = _derived(plain_run), _derived(sglang_run)
    assert list(vllm_derived.columns) == list(sglang_derived.columns)
    assert list(pd.read_csv(plain_run / "summary.csv").columns) == list(pd.read_csv(sglang_run / "summary.csv").columns)


def test_gsm8k_runs_on_vllm_with_accuracy(vllm_ngram_server, tmp_path):
    done = sparkbench("run", "gsm8k", "--server", vllm_ngram_server.base_url, "--limit", "3",
                      "--max-new-tokens", "24", "--results", str(tmp_path), "--no-progress")
    assert done.returncode == 0, done.stderr
    assert "gsm8k_accuracy_strict" in done.stdout
    table = pd.read_parquet(only_run_dir(tmp_path) / "requests.parquet")
    sampling = json.loads(table["sampling_json"].iloc[0])
    assert (sampling["temperature"], sampling["top_p"], sampling["top_k"]) == (0.6, 0.95, 29)


def test_a_server_that_does_not_speak_the_protocol_is_one_line(vllm_server, tmp_path):
    done = sparkbench(*synthetic_args(vllm_server, tmp_path, 1, 16, 4, "--backend", "sglang"))
    assert done.returncode == 2
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and "is this an SGLang server?" in lines[0]


def test_nightly_catches_speculation_switched_off(vllm_ngram_server, vllm_server, tmp_path):
    """Baseline: vLLM with n-gram speculation; candidate: the same model without it."""
    from tests.e2e.test_nightly import FEW, NEVER_BUSY, nightly, synthetic, write_config

    # Six requests keep the tier short; the gate's minimum sample is lowered to match (FEW). The
    # nights are judged on acceptance, not on the stream check: a busy CI host may hold back every
    # canary of a healthy server, so the night measures anyway (allow_buffered). Nor on the busy
    # rule (tests/e2e/test_nightly.py tests it): load from outside the suite, such as the proof's
    # bursts, rightly refuses a pin and makes a regression inconclusive, which is not this test's
    # question (NEVER_BUSY).
    config = write_config(tmp_path, vllm_ngram_server.base_url,
                          [synthetic(vllm_ngram_server.model_dir, prompts=6, output_tokens=128)],
                          allow_buffered=True, busy_limits=NEVER_BUSY, **FEW)
    pinned = nightly(config)
    assert pinned.returncode == 0, pinned.stderr
    done = nightly(config, "--server", vllm_server.base_url)
    assert done.returncode == 1, done.stdout + done.stderr
    verdict = done.stdout.strip().splitlines()[-1]
    assert verdict.startswith("verdict: REGRESSION (") and "synthetic:accept_length_token_weighted" in verdict


def _server_decode_ms(run_dir) -> pd.Series:
    """vLLM's own decode time per request, read raw: `metrics.generation_time_ms`."""
    table = pd.read_parquet(run_dir / "requests.parquet")
    return table["meta_info_json"].map(lambda raw: json.loads(raw)["metrics"]["generation_time_ms"])


def _ratio_from_raw(plain_run, ngram_run, plain_rows, spec_rows) -> float:
    """The ratio from vLLM's raw per-request decode times: rounds are the streamed chunks after the
    first; the rows are masks of the requests pooled."""
    plain = pd.read_parquet(plain_run / "requests.parquet")[plain_rows]
    spec = pd.read_parquet(ngram_run / "requests.parquet")[spec_rows]
    plain_step = _server_decode_ms(plain_run)[plain_rows].sum() / (plain["completion_tokens"] - 1).sum()
    return _server_decode_ms(ngram_run)[spec_rows].sum() / (spec["chunk_ns"].map(len) - 1).sum() / plain_step


def test_verify_cost_ratio_from_the_servers_own_timings(plain_run, ngram_run):
    """n-gram speculation against the same server without it. The ratio from the servers' own
    decode times equals one computed here from vLLM's raw per-request metrics, over the speculative
    requests whose stream was not flagged (a server that falls behind merges steps into one chunk).
    Where the client could time the streams, its ratio differs from the raw one over the same
    requests by no more than client and server disagree on those requests' decode times."""
    from harness.analysis.compare import compare_runs

    table = compare_runs([plain_run, ngram_run]).set_index(["run_id", "metric", "stat"])["value"]
    spec_id = json.loads((ngram_run / "manifest.json").read_text())["run_id"]
    base, spec = _derived(plain_run), _derived(ngram_run)
    counted = ~spec["stream_flagged"].to_numpy(dtype=bool)
    server = table[(spec_id, "verify_cost_ratio", "server_timings")]
    if not counted.any():  # every stream merged steps: no round count, so no ratio
        assert pd.isna(server)
        return
    assert server == pytest.approx(_ratio_from_raw(plain_run, ngram_run, base.index == base.index, counted), rel=1e-9)
    assert table[(spec_id, "decode_tokens_per_round", "value")] >= 1.0
    timed = ~base["stream_flagged"].to_numpy(dtype=bool)
    client = table[(spec_id, "verify_cost_ratio", "value")]
    if not timed.any():  # the client could time no baseline stream: no client ratio
        assert pd.isna(client)
        return
    same_requests = _ratio_from_raw(plain_run, ngram_run, timed, counted)
    base_gap, spec_gap = ((d["decode_ms"] / _server_decode_ms(r) - 1).abs().max()
                          for d, r in ((base, plain_run), (spec, ngram_run)))
    assert (1 - spec_gap) / (1 + base_gap) <= client / same_requests <= (1 + spec_gap) / max(1 - base_gap, 1e-9)


def test_roofline_of_a_plain_run_states_its_bytes(plain_run):
    """The tiny model's config is on this machine (vLLM names its folder): every weight of a dense
    model is read once per step, and achieved GB/s is bytes over the measured step."""
    from harness.metrics.model_bytes import WeightDtypes, weight_parts

    summary = pd.read_csv(plain_run / "summary.csv").set_index("metric")["value"]
    served = json.loads((plain_run / "manifest.json").read_text())["server"]["models"]["data"][0]["root"]
    config = json.loads((Path(served) / "config.json").read_text())
    weights = sum(p.bytes for p in weight_parts(config, WeightDtypes("bf16", "bf16")))
    assert summary["roofline_weight_bytes"] == pytest.approx(weights)
    assert summary["roofline_kv_cache_bytes"] > 0
    # NaN where every stream was flagged (no client decode time): no step time, no bandwidth.
    step_s = 1 / summary["decode_throughput_aggregate"]
    assert summary["roofline_achieved_gbps"] == pytest.approx(summary["roofline_bytes_per_step"] / step_s / 1e9,
                                                              nan_ok=True)
    done = sparkbench("summarize", str(plain_run), "--peak-gbps", "100")
    assert done.returncode == 0 and "bytes one decode step reads at batch 1" in done.stdout
    assert "x 2 B (bf16)" in done.stdout and "of 100 GB/s peak" in done.stdout


# vLLM's stream on the busy 2-core test bed sometimes holds tokens back (docs/vllm-streaming.md), so
# which requests are flagged varies from run to run. What must hold: the requests left in agree with
# the server's own TPOT (within 15%: the client's decode also covers the wait for [DONE]), and every
# flagged request is one where the server's own timing contradicts what the client saw.
VLLM_TPOT_TOLERANCE = 0.15


@pytest.mark.parametrize("run", ["plain_run", "ngram_run"])
def test_client_tpot_agrees_with_the_server_where_the_stream_shows_the_decode(run, request):
    derived = _derived(request.getfixturevalue(run))
    kept = derived[~derived["stream_flagged"].astype(bool)]
    if kept.empty:
        pytest.skip("the server held back every stream of this run (docs/vllm-streaming.md)")
    relative = ((kept["tpot_ms"] - kept["server_tpot_ms"]) / kept["server_tpot_ms"]).abs()
    assert (relative < VLLM_TPOT_TOLERANCE).all(), relative.tolist()


@pytest.mark.parametrize("run", ["plain_run", "ngram_run"])
def test_every_flagged_request_carries_its_rules_evidence(run, request):
    """A late first token is backed by the server's own TTFT (ttft_excess_ms beyond the slack); a
    held-back answer by a burst of tokens or by the client seeing less than half the server's decode.
    On a loaded 2-core host a burst can fall mid-stream, where the server's totals cannot show it."""
    derived = _derived(request.getfixturevalue(run))
    late = derived[derived["late_first_token"].astype(bool)]
    assert (late["ttft_excess_ms"] > 20.0).all(), late[["ttft_excess_ms", "server_ttft_ms"]].to_dict("records")
    held = derived[derived["buffered"].astype(bool)]
    evidence = (held["burst_share"] >= 0.5) | (held["client_decode_share"] < 0.5)
    assert evidence.all(), held[["burst_share", "client_decode_share"]].to_dict("records")
