"""Benchmark: CPU time per byte of `harness.secrets.redact` on adversarial and ordinary text.

Not a test: prints one line per shape and size. Run from the repository root:
`.venv/bin/python -m tests.bench_redact [--sizes 40000,1000000,4000000]`. Linear redaction shows
the same nanoseconds per byte at every size; a pattern that backtracks grows with the size.
"""

from __future__ import annotations

import argparse
import json
import time

from harness.secrets import redact

SHAPES = {
    "one long word": "x",
    "letters and digits": "a1",
    "scheme characters": "1a.",
    "scheme, no user info": "a://b",
    "repeated scheme": "http://",
    "JSON record text": json.dumps({"meta_info": {"id": "abc123", "url": "http://host/v1"}, "text": "word "}),
}


def nanoseconds_per_byte(text: str) -> float:
    started = time.process_time()
    redact(text)
    return (time.process_time() - started) * 1e9 / len(text)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="40000,1000000,4000000", help="comma-separated text sizes in bytes")
    sizes = [int(size) for size in parser.parse_args().sizes.split(",")]
    print(f"{'shape':<24}" + "".join(f"{size:>14,}" for size in sizes) + "   (ns of CPU per byte)")
    for name, piece in SHAPES.items():
        figures = [nanoseconds_per_byte(piece * max(1, size // len(piece))) for size in sizes]
        print(f"{name:<24}" + "".join(f"{figure:>14.1f}" for figure in figures))


if __name__ == "__main__":
    main()
