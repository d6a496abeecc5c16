"""Time the README's set-up from a fresh clone, cold (empty caches) then warm; prints seconds.

Not a test: run it from the repository root with `python3 -m tests.bench_setup` (add `--ref REF`
to time another commit, `--target test` to time `make test`, `--warm-here` to time one run in this
checkout with the caches it already has). It clones the commit into a new
temporary folder and points every cache there (SPARKBENCH_CACHE, UV_CACHE_DIR, PIP_CACHE_DIR), so
the first run starts from nothing and the user's caches are neither used nor touched; the clone and
the caches are removed at the end unless `--keep` (make's timestamped output stays in logs/).
`--workdir DIR --once` times one run in DIR's clone and caches (made on first use, kept), so a cold
set-up can be timed in pieces: `--target env-sglang` first, then `--target bench-synthetic`.

Figures per run: `setup` until make starts the benchmark command itself (every environment ready),
`first request` until the first row lands in requests.jsonl, `done` until make returns; `cpu` is
the CPU time (user + system) make and everything it started used, which a busy machine does not
inflate as it does the wall-clock figures. The load average beside them says how busy it was.
"""

from __future__ import annotations

import argparse
import os
import resource
import shutil
import subprocess
import tempfile
import threading
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
BENCH_COMMAND_MARK = "bin/sparkbench run "  # make echoes this line when the set-up is done


def fresh_clone(ref: str, workdir: Path) -> Path:
    clone = workdir / "clone"
    subprocess.run(["git", "clone", "--quiet", "--no-checkout", str(REPO), str(clone)], check=True)
    subprocess.run(["git", "-C", str(clone), "checkout", "--quiet", ref], check=True)
    return clone


def isolated_env(workdir: Path) -> dict[str, str]:
    caches = {"SPARKBENCH_CACHE": "sparkbench", "UV_CACHE_DIR": "uv", "PIP_CACHE_DIR": "pip"}
    return {**os.environ, **{name: str(workdir / "cache" / sub) for name, sub in caches.items()}}


def children_cpu_seconds() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def run_records(clone: Path) -> set[Path]:
    return set(clone.glob("results/*/requests.jsonl"))


def first_request_row(clone: Path, earlier: set[Path]) -> bool:
    return any(path.stat().st_size > 0 for path in run_records(clone) - earlier)


def _echo_and_mark(stream, log, marks: dict[str, float], start: float) -> None:
    """Copy make's output to the log with elapsed seconds; note when the benchmark command starts."""
    for line in stream:
        elapsed = time.monotonic() - start
        log.write(f"{elapsed:8.1f} {line}")
        log.flush()
        if BENCH_COMMAND_MARK in line:
            marks.setdefault("setup", elapsed)


def timed_make(clone: Path, target: str, env: dict[str, str], log_path: Path) -> dict[str, float]:
    """Run `make TARGET` in the clone; seconds to set-up done, first request row, and exit."""
    marks: dict[str, float] = {"load_before": os.getloadavg()[0]}
    cpu_before, earlier = children_cpu_seconds(), run_records(clone)
    start = time.monotonic()
    with open(log_path, "w") as log:
        proc = subprocess.Popen(["make", target], cwd=clone, env=env, text=True,
                                stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
        reader = threading.Thread(target=_echo_and_mark, args=(proc.stdout, log, marks, start))
        reader.start()
        while proc.poll() is None:
            if "first_request" not in marks and first_request_row(clone, earlier):
                marks["first_request"] = time.monotonic() - start
            time.sleep(0.2)
        reader.join()
    marks["done"] = time.monotonic() - start
    marks["cpu"] = children_cpu_seconds() - cpu_before
    marks["load_after"] = os.getloadavg()[0]
    marks["exit_code"] = proc.returncode
    return marks


def format_marks(label: str, marks: dict[str, float]) -> str:
    seconds = "  ".join(f"{name} {marks[name]:6.1f} s" for name in ("setup", "first_request", "done", "cpu")
                        if name in marks)
    return (f"{label:5s} {seconds}  exit {marks['exit_code']}  "
            f"load average {marks['load_before']:.2f} -> {marks['load_after']:.2f}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--ref", default="HEAD", help="commit to time (default HEAD)")
    parser.add_argument("--target", default="bench-synthetic", help="make target (default bench-synthetic)")
    parser.add_argument("--keep", action="store_true", help="keep the temporary folder (clone, caches, logs)")
    parser.add_argument("--warm-here", action="store_true",
                        help="time one warm run in this checkout with its usual caches (no clone)")
    parser.add_argument("--workdir", type=Path, help="clone and caches in this folder (made if absent, kept)")
    parser.add_argument("--once", action="store_true", help="one run (cold in a new --workdir), not cold then warm")
    args = parser.parse_args()
    if args.warm_here:
        marks = timed_make(REPO, args.target, dict(os.environ), Path(tempfile.mkdtemp()) / "warm.log")
        print(format_marks("warm", marks), flush=True)
        return
    workdir = args.workdir or Path(tempfile.mkdtemp(prefix="sparkbench-setup-"))
    logs = workdir / "logs"
    try:
        clone = workdir / "clone"
        fresh = not (clone / ".git").exists()
        if fresh:
            logs.mkdir(parents=True, exist_ok=True)
            fresh_clone(args.ref, workdir)
        labels = ["cold", "warm"] if fresh else ["again"]
        env = isolated_env(workdir)
        commit = subprocess.run(["git", "-C", str(clone), "rev-parse", "--short", "HEAD"],
                                capture_output=True, text=True, check=True).stdout.strip()
        print(f"make {args.target} at {commit}, {os.cpu_count()} cores, logs in {logs}", flush=True)
        for label in labels[:1] if args.once else labels:
            marks = timed_make(clone, args.target, env, logs / f"{label}-{args.target}.log")
            print(format_marks(label, marks), flush=True)
            if marks["exit_code"] != 0:
                break
    finally:
        if not (args.keep or args.workdir):
            for bulky in ("clone", "cache"):
                shutil.rmtree(workdir / bulky, ignore_errors=True)


if __name__ == "__main__":
    main()
