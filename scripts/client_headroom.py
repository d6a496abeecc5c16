"""The client's headroom: chunks per second that `--processes` 1, 2, 4, 8 sustain against the
project's fast local stream server, at rising concurrency. Prints figures; not a test.

    python scripts/client_headroom.py [--processes 1 2 4 8] [--concurrency 8 32 128 512] [--out FILE]

Each cell runs the real `--processes` machinery (`harness.run.processes.ProcessPool`: N worker
processes, each its own event loop and connections, every record sent to the parent) with SGLang's
native client against `tests/fakes/fast_server.py` (incremental stream, `--rate` chunks/s per
stream, served by `--server-workers` processes sharing one listening socket, so that the server is
not what limits). Figures per cell: chunks received per second over the cell's span
(first request sent to last [DONE], aggregate), the workers' CPU per chunk (their own process time, start-up excluded), and the
parent's CPU per chunk (it receives every record). Offered load is concurrency x rate. Run with
nothing else heavy on the host: every other process competes for the same cores.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from harness.engines.sglang import SGLangBackend  # noqa: E402
from harness.engines.sse import run_streams  # noqa: E402
from harness.run.pool import StopRules  # noqa: E402
from harness.run.processes import ProcessPool  # noqa: E402
from harness.run.runner import RunOptions  # noqa: E402
from harness.spec import Prompt, SamplingParams  # noqa: E402
from tests.fakes.fast_server import fast_server  # noqa: E402


def cell(url: str, processes: int, concurrency: int, tokens: int) -> dict:
    """One cell: `concurrency` streams in flight over `processes` workers, 4 streams' worth each.
    The span is first request sent to last [DONE] on the parent's clock (worker start-up excluded)."""
    prompt = Prompt("headroom", SamplingParams(max_new_tokens=tokens), input_ids=(1, 2, 3))
    work = [(seq, prompt) for seq in range(concurrency * 4)]
    chunks, sent, ended = 0, [], []

    def record(seq, prompt, result) -> None:
        nonlocal chunks
        chunks += len(result.chunk_ns)
        sent.append(result.sent_ns)
        ended.append(result.end_ns)

    options = RunOptions(base_url=url, concurrency=concurrency, processes=processes, show_progress=False)
    pool = ProcessPool(SGLangBackend(), options, record, StopRules(max_errors=0), processes)
    parent_cpu = time.process_time()
    run_streams(pool.run(work))
    parent_cpu = time.process_time() - parent_cpu
    span = (max(ended) - min(sent)) / 1e9
    return {"processes": processes, "concurrency": concurrency, "chunks": chunks, "span_s": round(span, 2),
            "chunks_per_s": round(chunks / span), "worker_cpu_us_per_chunk": round(pool.cpu_s / chunks * 1e6, 1),
            "parent_cpu_us_per_chunk": round(parent_cpu / chunks * 1e6, 1), "stopped": pool.stop_reason}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--processes", type=int, nargs="+", default=[1, 2, 4, 8])
    parser.add_argument("--concurrency", type=int, nargs="+", default=[8, 32, 128, 512])
    parser.add_argument("--tokens", type=int, default=256)
    parser.add_argument("--rate", type=float, default=2000.0, help="chunks per second of each stream")
    parser.add_argument("--server-workers", type=int, default=8)
    parser.add_argument("--out", type=Path)
    args = parser.parse_args()
    print(f"host: {os.cpu_count()} cpus, load average {os.getloadavg()}; {args.server_workers} server processes, "
          f"{args.rate:.0f} chunks/s per stream, {args.tokens} tokens per stream", flush=True)
    with fast_server(args.rate, workers=args.server_workers) as url:
        asyncio.run(asyncio.sleep(0.5))  # the server processes are listening
        for processes in args.processes:
            for concurrency in [c for c in args.concurrency if c >= processes]:
                row = cell(url, processes, concurrency, args.tokens)
                print(json.dumps(row), flush=True)
                if args.out:
                    with args.out.open("a", encoding="utf-8") as out:
                        out.write(json.dumps(row) + "\n")


if __name__ == "__main__":
    main()
