"""The client's footprint beside a plain streaming client of the same requests. Prints figures; not a test.

    .venv/bin/python scripts/client_footprint.py [--server URL --tokenizer DIR [--keep-prefix-cache]]
        [--requests 20] [--input-tokens 512] [--output-tokens 256] [--step-ms 10] [--pairs 1]

Against one server (SGLang's native `/generate`), in one invocation, at concurrency 1: `sparkbench
run synthetic` (as a user runs it: the console script, telemetry on), then a plain client (aiohttp's
streaming client, as SGLang's own benchmark client uses it, a dozen lines in its own process:
`PLAIN_CLIENT`; it stamps each chunk's arrival and decodes its JSON) sending requests of the same
shape (the same synthetic prompts with another salt, so neither finds the other's prefix cached),
one warm-up first like sparkbench's; `--pairs N` runs N such pairs, one after the other, and gives
the median of each figure. For each: CPU per chunk inside the run (sparkbench's manifest
`client_load`; the plain client's own process time over its requests), whole-process CPU per
chunk and in all, peak RSS, and start-up (wall time of a whole process: `sparkbench run synthetic
--help`; the plain client's interpreter and imports), with sparkbench / plain for each, as the
rows of docs/client.md's table (date, host and load average before and after). Without `--server`
it starts the project's scripted fake (`tests/fakes/stream_server.py`, SGLang-shaped cumulative
chunks, one token every `--step-ms`) in a process of its own, with a word-level tokenizer made
here; an already-running fake is `--server URL --tokenizer DIR --keep-prefix-cache` (it has no
cache to flush). Run it with nothing else running: every other process competes for the same
cores and caches, and at one chunk every few milliseconds the cost per chunk is mostly the
wake-up of an idle process.
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from contextlib import contextmanager, nullcontext
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from harness.engines.sglang import request_body  # noqa: E402
from harness.facts import EngineFacts  # noqa: E402
from workloads.synthetic import make_synthetic  # noqa: E402

SEED, SALT = 0, 1  # sparkbench's prompts; the plain client's take SALT + 1
PLAIN_CLIENT = """
import asyncio, json, sys, time
import aiohttp
if sys.argv[1] == "startup":
    sys.exit(0)
url, bodies = sys.argv[1], json.load(open(sys.argv[2]))

async def main():
    arrivals, cpu = [], time.process_time()
    async with aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=None, sock_read=900)) as http:
        for body in bodies:
            async with http.post(url + "/generate", json=body) as answer:
                answer.raise_for_status()
                async for line in answer.content:
                    if line.startswith(b"data:"):
                        if line[5:].strip() == b"[DONE]":
                            break
                        arrivals.append((time.perf_counter_ns(), json.loads(line[5:])["meta_info"]))
    print(json.dumps({"cpu_s": time.process_time() - cpu, "chunks": len(arrivals)}))

asyncio.run(main())
"""
FAKE_SERVER = """
import sys, time
from tests.fakes.stream_server import Script, serving
with serving(Script(api="sglang", step_s=float(sys.argv[1]))) as url:
    print(url, flush=True)
    time.sleep(24 * 3600)
"""


@dataclass
class Process:
    """One finished child process: exit code, wall time, CPU (user + system), peak RSS, stdout."""

    code: int
    wall_s: float
    cpu_s: float
    peak_rss_mb: float
    stdout: str


def measured(command: list[str]) -> Process:
    """Run `command` to its end and read its own resource use (`os.wait4`: this child only)."""
    with tempfile.TemporaryFile("w+") as out:
        started = time.perf_counter()
        child = subprocess.Popen(command, stdout=out, cwd=REPO)
        _, status, usage = os.wait4(child.pid, 0)
        wall = time.perf_counter() - started
        child.returncode = os.waitstatus_to_exitcode(status)
        out.seek(0)
        return Process(child.returncode, wall, usage.ru_utime + usage.ru_stime, usage.ru_maxrss / 1024, out.read())


@contextmanager
def fake_server(step_ms: float):
    """The scripted SGLang-shaped fake in its own process (its CPU is not the client's); its URL."""
    server = subprocess.Popen([sys.executable, "-c", FAKE_SERVER, str(step_ms / 1000)], cwd=REPO,
                              stdout=subprocess.PIPE, text=True,
                              stderr=subprocess.DEVNULL)  # it prints the reset of every keep-alive a client drops at exit
    try:
        yield server.stdout.readline().strip()
    finally:
        server.terminate()
        server.wait(timeout=10)


def word_tokenizer(folder: Path) -> Path:
    """A word-level tokenizer of 1,000 words: enough distinct first tokens for any run here."""
    from tokenizers import Tokenizer, models

    Tokenizer(models.WordLevel({f"w{i}": i for i in range(1000)}, unk_token="w0")).save(str(folder / "tokenizer.json"))
    return folder


def sparkbench_command() -> list[str]:
    """The console script a user runs, else the module."""
    script = Path(sys.executable).parent / "sparkbench"
    return [str(script)] if script.exists() else [sys.executable, "-m", "harness.cli"]


def run_sparkbench(url: str, shape: argparse.Namespace, tokenizer: Path, results: Path) -> dict:
    """`sparkbench run synthetic` at c=1 with one warm-up into the empty folder `results`: in-run CPU
    and chunks from its manifest."""
    command = [*sparkbench_command(), "run", "synthetic", "--server", url, "--tokenizer", str(tokenizer),
               "--num-prompts", str(shape.requests), "--input-tokens", str(shape.input_tokens),
               "--output-tokens", str(shape.output_tokens), "--seed", str(SEED), "--salt", str(SALT),
               "--concurrency", "1", "--warmup", "1", "--no-progress", "--results", str(results),
               *(["--keep-prefix-cache"] if shape.keep_prefix_cache else [])]
    done = measured(command)
    if done.code != 0:
        raise SystemExit(f"client_footprint: sparkbench exited {done.code}")
    load = json.loads(next(results.glob("*/manifest.json")).read_text())["client_load"]
    startup = measured([*sparkbench_command(), "run", "synthetic", "--help"])
    return figures(done, load["cpu_s"], load["chunks"], startup.wall_s)


def run_plain(url: str, shape: argparse.Namespace, tokenizer: Path, folder: Path) -> dict:
    """The plain client over the same shape (another salt), one warm-up first."""
    build = make_synthetic(num_prompts=shape.requests, input_tokens=shape.input_tokens,
                           output_tokens=shape.output_tokens, seed=SEED, salt=SALT + 1, tokenizer=tokenizer)
    workload = build(EngineFacts())
    bodies = folder / "bodies.json"
    bodies.write_text(json.dumps([request_body(p) for p in [*workload.warmup_prompts(1), *workload.prompts()]]))
    done = measured([sys.executable, "-c", PLAIN_CLIENT, url, str(bodies)])
    if done.code != 0:
        raise SystemExit(f"client_footprint: the plain client exited {done.code}")
    own = json.loads(done.stdout.splitlines()[-1])
    startup = measured([sys.executable, "-c", PLAIN_CLIENT, "startup"])
    return figures(done, own["cpu_s"], own["chunks"], startup.wall_s)


def figures(done: Process, in_run_cpu_s: float, chunks: int, startup_s: float) -> dict:
    return {"in-run CPU us/chunk": in_run_cpu_s / chunks * 1e6, "process CPU us/chunk": done.cpu_s / chunks * 1e6,
            "process CPU s": done.cpu_s, "peak RSS MB": done.peak_rss_mb, "start-up s": startup_s,
            "chunks": chunks, "wall s": done.wall_s}


def load_average() -> str:
    return " ".join(f"{value:.2f}" for value in os.getloadavg())


def table(ours: list[dict], plain: list[dict], date: str, host: str) -> str:
    """docs/client.md's table: one row per figure, the median over the pairs, and sparkbench / plain."""
    rows = ["| date | host, load | figure | sparkbench | plain aiohttp | ratio |", "|---|---|---|---|---|---|"]
    for name in ours[0]:
        mine, theirs = (statistics.median(pair[name] for pair in side) for side in (ours, plain))
        ratio = f"{mine / theirs:.2f}" if theirs else "-"
        rows.append(f"| {date} | {host} | {name} | {mine:,.2f} | {theirs:,.2f} | {ratio} |")
    return "\n".join(rows)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--server", help="SGLang base URL (default: start the scripted fake here)")
    parser.add_argument("--tokenizer", type=Path, help="the served model's tokenizer folder (needed with --server)")
    parser.add_argument("--requests", type=int, default=20)
    parser.add_argument("--input-tokens", type=int, default=512)
    parser.add_argument("--output-tokens", type=int, default=256)
    parser.add_argument("--step-ms", type=float, default=10.0, help="the fake's time per token [10]")
    parser.add_argument("--keep-prefix-cache", action="store_true",
                        help="with --server: a server that cannot flush its prefix cache (the fake)")
    parser.add_argument("--pairs", type=int, default=1, help="sparkbench-then-plain pairs; medians are printed [1]")
    shape = parser.parse_args()
    if shape.server and not shape.tokenizer:
        parser.error("--server needs --tokenizer (the plain client's prompts are built from it)")
    shape.keep_prefix_cache = shape.keep_prefix_cache or not shape.server  # the fake started here has no cache
    started, before = datetime.now(timezone.utc), load_average()
    print(f"{started:%Y-%m-%d %H:%M} UTC, {socket.gethostname()}, {os.cpu_count()} CPUs, load average {before}",
          flush=True)
    ours, plain = [], []
    with tempfile.TemporaryDirectory() as scratch:
        folder = Path(scratch)
        tokenizer = shape.tokenizer or word_tokenizer(folder)
        with nullcontext(shape.server) if shape.server else fake_server(shape.step_ms) as url:
            for pair in range(shape.pairs):
                ours.append(run_sparkbench(url, shape, tokenizer, folder / f"runs-{pair}"))
                plain.append(run_plain(url, shape, tokenizer, folder))
                print(f"pair {pair + 1}: in-run CPU us/chunk {ours[-1]['in-run CPU us/chunk']:.1f} against "
                      f"{plain[-1]['in-run CPU us/chunk']:.1f}, load average {load_average()}", flush=True)
    print(f"server: {shape.server or f'scripted fake, one token every {shape.step_ms:g} ms'}; c=1, "
          f"{shape.requests} requests of {shape.input_tokens} in / {shape.output_tokens} out, one warm-up each, "
          f"{shape.pairs} pair(s), medians")
    host = f"{socket.gethostname()} ({os.cpu_count()} CPUs), load {before} -> {load_average()}"
    print(table(ours, plain, f"{started:%Y-%m-%d %H:%M} UTC", host))


if __name__ == "__main__":
    main()
