"""Run a sparkbench command and print the client's CPU time per streamed chunk.

    python client_cost.py RESULTS_DIR -- COMMAND...

CPU is the child process's user + system time (getrusage), so it includes start-up (imports, the
tokenizer, prompt generation) and the warm-up request: an upper bound on the cost of the measured
part. Chunks are those the run recorded (requests.jsonl under RESULTS_DIR).
"""

from __future__ import annotations

import json
import resource
import subprocess
import sys
from pathlib import Path


def recorded_chunks(results: Path) -> tuple[int, int]:
    """(requests, token-bearing chunks) over every requests.jsonl under `results`."""
    requests = chunks = 0
    for path in results.glob("*/requests.jsonl"):
        for line in path.read_text(encoding="utf-8").splitlines():
            requests += 1
            chunks += len(json.loads(line)["chunk_ns"])
    return requests, chunks


def main(argv: list[str]) -> int:
    if len(argv) < 3 or argv[1] != "--":
        raise SystemExit(__doc__)
    results, command = Path(argv[0]), argv[2:]
    code = subprocess.run(command).returncode
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu_s = usage.ru_utime + usage.ru_stime
    requests, chunks = recorded_chunks(results)
    per_chunk = f"{cpu_s / chunks * 1e6:.0f} us per chunk" if chunks else "no chunks recorded"
    print(f"client CPU {cpu_s:.2f} s for {requests} requests, {chunks} chunks: {per_chunk} "
          f"(start-up and warm-up included)")
    return code


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
