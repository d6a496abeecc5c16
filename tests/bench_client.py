"""Benchmark: the client's own cost per streamed chunk, over real sockets. Not a test: prints figures.

Run from the repository root (heavy: with nothing else heavy on the host):
- `.venv/bin/python -m tests.bench_client fake`: one client process against the project's fast
  local server (`tests/fakes/fast_server.py`, its own process, pre-built chunks at a set rate):
  chunks per second received, client CPU per chunk, and the chunks per CPU-second that makes.
- `.venv/bin/python -m tests.bench_client sglang [--form cumulative|incremental]`: the real SGLang
  test bed (started here, or `--server URL --model DIR`), 512 tokens in, greedy, at c=1 (6 x 256
  out), c=16 (16 x 256 out) and with `--long` c=1 (1 x 2,048 out). Each shape runs `sparkbench run synthetic`
  and then SGLang's own `python -m sglang.benchmark.serving` from the test-bed environment against
  the same server, and prints them side by side: in-run client CPU (warm-up plus measured requests,
  what the process spent inside the run) per streamed chunk, median TTFT, sparkbench's median TTFT
  minus the server's own (`meta_info.first_token_latency`), and the whole process's CPU and peak
  RSS (start-up included).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import yaml

from harness.engines.sglang import SGLangBackend
from harness.engines.sse import Session, run_streams
from harness.guard.profiles import shipped_profile_paths
from harness.metrics import derive_requests
from harness.records.requests import load_requests
from harness.run.embedded import embedded_server
from harness.spec import Prompt, SamplingParams
from harness.testbed.envs import env_python
from tests.fakes.fast_server import fast_server

SHAPES = ((1, 6, 256), (16, 16, 256))  # concurrency, requests, output tokens
LONG_SHAPE = (1, 1, 2048)  # with --long: at the test bed's 30-100 tokens/s, minutes per request
INPUT_TOKENS = 512
SGLANG_BENCH = """
import json, sys, time
import orjson
import sglang.benchmark.serving as s
seen = {"chunks": 0, "metrics_cpu": 0.0}
class CountingJSON:  # counts the chunks its client decodes
    def __getattr__(self, name): return getattr(orjson, name)
    def loads(self, data):
        seen["chunks"] += 1
        return orjson.loads(data)
s.orjson = CountingJSON()
compute = s.calculate_metrics
def timed_metrics(*a, **k):
    start = time.process_time(); out = compute(*a, **k); seen["metrics_cpu"] += time.process_time() - start
    return out
s.calculate_metrics = timed_metrics
run = s.benchmark
async def timed_run(*a, **k):
    cpu, wall = time.process_time(), time.perf_counter()
    out = await run(*a, **k)
    load = {"cpu_s": time.process_time() - cpu - seen["metrics_cpu"], "wall_s": time.perf_counter() - wall,
            "chunks": seen["chunks"], "median_ttft_ms": out["median_ttft_ms"]}
    print("BENCH_LOAD " + json.dumps(load), flush=True)
    return out
s.benchmark = timed_run
sys.argv = ["serving", *sys.argv[1:]]
s.cli_main()
"""


def fake_figures(streams: int, tokens: int, rate: float, cumulative: bool) -> dict[str, float]:
    """One client process streaming `streams` requests of `tokens` chunks at `rate` chunks/s each."""
    prompt = Prompt("bench", SamplingParams(max_new_tokens=tokens), input_ids=(1, 2, 3))
    with fast_server(rate, cumulative) as url:
        async def run() -> tuple[list, float, float]:
            async with Session(read_timeout_s=60.0) as http:
                await SGLangBackend().send(http, url, prompt)  # a first stream, not counted: set-up costs
                cpu, wall = time.process_time(), time.perf_counter()
                results = await asyncio.gather(*(SGLangBackend().send(http, url, prompt) for _ in range(streams)))
                return results, time.process_time() - cpu, time.perf_counter() - wall

        results, cpu, wall = run_streams(run())
    assert all(r.error_kind is None and r.completion_tokens == tokens for r in results)
    chunks = sum(len(r.chunk_ns) for r in results)
    return {"chunks": chunks, "per_s": chunks / wall, "us": cpu / chunks * 1e6, "per_cpu_s": chunks / cpu}


def main_fake(args: argparse.Namespace) -> None:
    print(f"{'streams':>7} {'form':>11} {'tokens':>6} {'offered/s':>9} {'got/s':>8} {'CPU us/chunk':>12} "
          f"{'chunks per CPU-s':>16}")
    for streams, tokens, cumulative in ((1, 2048, False), (1, 2048, True), (16, 512, False), (16, 512, True),
                                        (64, 512, False)):
        fig = fake_figures(streams, tokens, args.rate, cumulative)
        print(f"{streams:>7} {'cumulative' if cumulative else 'incremental':>11} {tokens:>6} "
              f"{streams * args.rate:>9.0f} {fig['per_s']:>8.0f} {fig['us']:>12.1f} {fig['per_cpu_s']:>16.0f}",
              flush=True)


def measured(argv: list[str]) -> tuple[str, dict]:
    """Run a command; (its stdout, its CPU seconds and peak RSS in MB from the kernel's accounting)."""
    with tempfile.TemporaryFile("w+") as errors:
        proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=errors, text=True)
        out = proc.stdout.read()
        _, status, usage = os.wait4(proc.pid, 0)  # reaped here, with its own resource usage
        proc.returncode = os.waitstatus_to_exitcode(status)
        if proc.returncode:
            errors.seek(0)
            raise RuntimeError(f"{Path(argv[0]).name} {argv[1]} failed: {errors.read()[-600:]}")
    return out, {"process_cpu_s": usage.ru_utime + usage.ru_stime, "peak_rss_mb": usage.ru_maxrss / 1024}


def sparkbench_shape(url: str, model: Path, concurrency: int, requests: int, tokens: int, folder: Path) -> dict:
    argv = [sys.executable, "-m", "harness.cli", "run", "synthetic", "--server", url, "--tokenizer", str(model),
            "--num-prompts", str(requests), "--input-tokens", str(INPUT_TOKENS), "--output-tokens", str(tokens),
            "--concurrency", str(concurrency), "--results", str(folder), "--no-progress"]
    _, process = measured(argv)
    run_dir = next(p for p in folder.iterdir() if p.is_dir())
    load = json.loads((run_dir / "manifest.json").read_text())["client_load"]
    rows = derive_requests(load_requests(run_dir))
    return {**load, **process, "median_ttft_ms": float(rows["ttft_ms"].median()),
            "ttft_gap_ms": float((rows["ttft_ms"] - rows["server_ttft_ms"]).median())}


def sglang_bench_shape(url: str, model: Path, concurrency: int, requests: int, tokens: int, folder: Path) -> dict:
    argv = [str(env_python("sglang")), "-c", SGLANG_BENCH, "--backend", "sglang", "--base-url", url,
            "--model", str(model), "--tokenizer", str(model), "--dataset-name", "random-ids",
            "--random-input-len", str(INPUT_TOKENS), "--random-output-len", str(tokens),
            "--random-range-ratio", "1", "--num-prompts", str(requests), "--max-concurrency", str(concurrency),
            "--warmup-requests", "1", "--disable-tqdm", "--output-file", str(folder / "sglang.jsonl")]
    out, process = measured(argv)
    line = next(line for line in out.splitlines() if line.startswith("BENCH_LOAD "))
    return {**json.loads(line[len("BENCH_LOAD "):]), **process, "ttft_gap_ms": float("nan")}


def print_row(form: str, shape: tuple[int, int, int], client: str, fig: dict) -> None:
    concurrency, requests, tokens = shape
    print(f"{form:>11} {concurrency:>3} {requests:>4} {tokens:>5} {client:>10} {fig['cpu_s'] / fig['chunks'] * 1e6:>9.1f} "
          f"{fig['chunks']:>7} {fig['median_ttft_ms']:>9.1f} {fig['ttft_gap_ms']:>8.1f} {fig['process_cpu_s']:>8.2f} "
          f"{fig['peak_rss_mb']:>7.0f}", flush=True)


def main_sglang(args: argparse.Namespace) -> None:
    print(f"{'form':>11} {'c':>3} {'reqs':>4} {'out':>5} {'client':>10} {'us/chunk':>9} {'chunks':>7} "
          f"{'TTFT ms':>9} {'gap ms':>8} {'proc CPU':>8} {'RSS MB':>7}")
    with _server(args) as (url, model):
        for shape in (*SHAPES, LONG_SHAPE) if args.long else SHAPES:
            for client, measure in (("sparkbench", sparkbench_shape), ("sglang", sglang_bench_shape)):
                with tempfile.TemporaryDirectory() as folder:
                    try:
                        print_row(args.form, shape, client, measure(url, model, *shape, Path(folder)))
                    except RuntimeError as exc:  # one client failing leaves the other's figures
                        print(f"{args.form:>11} {shape} {client}: {exc}", flush=True)


def _server(args: argparse.Namespace):
    """The server to measure against: the one given, else the test bed in the stream form asked for."""
    if args.server:
        from contextlib import nullcontext
        return nullcontext((args.server, Path(args.model)))
    profile = "cpu-testbed"
    if args.form == "incremental":
        spec = yaml.safe_load(shipped_profile_paths()["cpu-testbed"].read_text())
        spec["name"] = "cpu-testbed-incremental"
        spec["launch"]["args"].append("--incremental-streaming-output")
        profile = str(Path(tempfile.mkdtemp()) / "incremental.yaml")
        Path(profile).write_text(yaml.safe_dump(spec))

    from contextlib import contextmanager

    @contextmanager
    def started():
        with embedded_server(profile, log_name="bench-client") as server:
            yield server.base_url, server.model_dir
    return started()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="target", required=True)
    fake = sub.add_parser("fake")
    fake.add_argument("--rate", type=float, default=2000.0, help="chunks per second of each stream")
    real = sub.add_parser("sglang")
    real.add_argument("--form", choices=("cumulative", "incremental"), default="cumulative")
    real.add_argument("--server")
    real.add_argument("--model")
    real.add_argument("--long", action="store_true", help="also 2,048 output tokens")
    args = parser.parse_args()
    (main_fake if args.target == "fake" else main_sglang)(args)


if __name__ == "__main__":
    main()
