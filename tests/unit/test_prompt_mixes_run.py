"""Length mixes, shared prefixes and traces with lengths, run against the scripted server: the drawn
lengths reach the server and the records on SGLang's native API; the shared prefixes' cache hits
are read from the server's own counts on both APIs; a trace is replayed with its lengths and
groups; a trace the workload cannot replay is refused before the server is asked."""

from __future__ import annotations

import csv
import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from harness.analysis.run import Run
from harness.analysis.shapes import shape_text
from harness.analysis.tables import format_run_summary
from harness.cli import app
from tests.fakes.recording_server import recording
from tests.fakes.stream_server import Script
from tests.unit.test_fault_cli import GSM8K, one_line_error, sparkbench

EXAMPLE_TRACE = Path(__file__).parents[2] / "workloads" / "data" / "traces" / "example.csv"
STREAMS = ("/generate", "/v1/completions", "/v1/chat/completions")


def tokenizer(folder: Path) -> Path:
    """A word-level tokenizer of 500 ordinary tokens: enough distinct first tokens for every prompt."""
    from tokenizers import Tokenizer, models

    folder.mkdir(parents=True, exist_ok=True)
    Tokenizer(models.WordLevel({f"w{i}": i for i in range(500)}, unk_token="w0")).save(str(folder / "tokenizer.json"))
    return folder


def run_on(tmp_path: Path, script: Script, *args: str) -> tuple[Run, list]:
    results = tmp_path / "runs"
    with recording(script) as (url, seen):
        done = CliRunner().invoke(app, ["run", *args, "--tokenizer", str(tokenizer(tmp_path / "tok")), "--server", url,
                                        "--results", str(results), "--warmup", "1", "--no-progress",
                                        "--scrape-interval", "0.05"])
    assert done.exit_code == 0, done.output
    return Run.load(next(results.iterdir())), [body for _, path, _, body in seen if path in STREAMS][1:]


def values(run: Run, metric: str) -> float:
    summary = run.summary
    return float(summary[(summary["metric"] == metric) & (summary["stat"] == "value")]["value"].iloc[0])


def test_drawn_lengths_reach_the_server_and_the_records_on_the_native_api(tmp_path):
    run, sent = run_on(tmp_path, Script(api="sglang"), "synthetic", "--num-prompts", "6", "--input-len-dist",
                       "uniform:20,60", "--output-len-dist", "lognormal:8,3", "--keep-prefix-cache")
    records = run.requests
    items = [json.loads(raw) for raw in records["item_json"]]
    assert records["prompt_tokens"].tolist() == [item["input_tokens"] for item in items]
    assert records["completion_tokens"].tolist() == [item["output_tokens"] for item in items]
    assert [len(body["input_ids"]) for body in sent] == [item["input_tokens"] for item in items]
    assert len({item["input_tokens"] for item in items}) > 2
    assert run.record.workload.as_recorded()["input_len_dist"] == "uniform:20,60"
    assert shape_text(run) == "synthetic: uniform:20,60 in / lognormal:8,3 out, greedy"
    assert values(run, "prefix_cache_hit_rate") == 0.0  # the server said so for each request


@pytest.mark.parametrize("api", ["sglang", "openai"])
def test_shared_prefix_hits_come_from_the_servers_own_counts(tmp_path, api):
    groups, members, prefix, question = 2, 3, 40, 8
    run, sent = run_on(tmp_path, Script(api=api, prefix_cache=True), "shared-prefix", "--num-groups", str(groups),
                       "--prompts-per-group", str(members), "--prefix-tokens", str(prefix), "--question-tokens",
                       str(question), "--output-tokens", "4", *(["--keep-prefix-cache"] if api == "sglang" else []))
    records = run.requests
    assert records["cached_tokens"].sum() == groups * (members - 1) * prefix  # all but each group's first
    expected = (members - 1) * prefix / (members * (prefix + question))
    assert values(run, "prefix_cache_hit_rate") == pytest.approx(expected)
    server = values(run, "prefix_cache_hit_rate_server")  # /metrics counters: the fake's vLLM ones
    assert server == pytest.approx(expected) if api == "openai" else server != server  # SGLang: not exported
    assert run.record.prefix_cache_hits == groups * (members - 1)
    assert shape_text(run) == "shared-prefix: 2 groups sharing a 40-token prefix / 48 in / 4 out, greedy"
    assert run.record.guard is None or "post_run" not in run.record.guard.as_recorded()
    printed = format_run_summary(run).splitlines()  # what the run prints at its end
    assert [line.split()[2] for line in printed if line.startswith("prefix_cache_hit_rate ")] == [f"{expected:.3f}"]
    server = [line.split()[2] for line in printed if line.startswith("prefix_cache_hit_rate_server ")]
    assert server == ([f"{expected:.3f}"] if api == "openai" else [])  # SGLang exports no counter: no line


def test_a_trace_is_replayed_with_its_lengths_and_groups(tmp_path):
    run, sent = run_on(tmp_path, Script(prefix_cache=True), "shared-prefix", "--prefix-tokens", "64",
                       "--schedule", str(EXAMPLE_TRACE))
    with EXAMPLE_TRACE.open(encoding="utf-8") as file:
        rows = list(csv.DictReader(file))
    records = run.requests.sort_values("seq")
    assert records["prompt_tokens"].tolist() == [int(row["input_tokens"]) for row in rows]
    assert records["completion_tokens"].tolist() == [int(row["output_tokens"]) for row in rows]
    offsets = (records["scheduled_ns"] - records["scheduled_ns"].min()) / 1e9
    assert offsets.round(6).tolist() == [float(row["offset_s"]) for row in rows]
    assert shape_text(run) == "shared-prefix: 3 groups sharing a 64-token prefix / lengths of the --schedule trace, greedy"
    first_of_group = {row["prefix_group"]: seq for seq, row in reversed(list(enumerate(rows)))}
    hits = records["cached_tokens"].tolist()
    assert [hit >= 64 for hit in hits] == [seq != first_of_group[row["prefix_group"]] for seq, row in enumerate(rows)]


def test_synthetic_replays_a_traces_lengths_on_the_openai_api(tmp_path):
    trace = tmp_path / "trace.jsonl"
    trace.write_text("".join(json.dumps({"offset_s": i * 0.02, "input_tokens": 10 + i, "output_tokens": 3 + i}) + "\n"
                             for i in range(4)), encoding="utf-8")
    run, sent = run_on(tmp_path, Script(), "synthetic", "--schedule", str(trace))
    # Sends 20 ms apart may reach the server in either order on a busy host: each row is matched
    # to its request by the record's seq, not by arrival.
    assert sorted(len(body["prompt"]) for body in sent) == [10, 11, 12, 13]
    records = run.requests.sort_values("seq")
    assert records["prompt_tokens"].tolist() == [10, 11, 12, 13]
    assert records["completion_tokens"].tolist() == [3, 4, 5, 6]
    assert run.record.workload.as_recorded()["num_prompts"] == 4


@pytest.mark.parametrize("text, workload, message", [
    ("offset_s,input_tokens\n0,12\n1,0\n", "gsm8k", "line 3: input_tokens '0' is not a whole number >= 1"),
    ("offset_s,output_tokens\n0,12\n1,\n", "gsm8k", "line 3: no output_tokens"),
    ("offset_s,input_tokens\n0,12\n", "gsm8k", "its input_tokens column needs a workload that makes prompts"),
    ("offset_s,prefix_group\n0,a\n", "synthetic", "its prefix_group column needs a workload that makes prompts"),
])
def test_a_trace_that_cannot_be_replayed_is_refused_before_the_server_is_asked(text, workload, message, tmp_path):
    schedule = tmp_path / "trace.csv"
    schedule.write_text(text)
    command = GSM8K if workload == "gsm8k" else ("run", "synthetic")
    done = sparkbench(*command, "--server", "http://127.0.0.1:9", "--schedule", str(schedule),
                      "--results", str(tmp_path / "results"), cwd=Path.cwd())
    assert message in one_line_error(done)
    assert not (tmp_path / "results").exists()
