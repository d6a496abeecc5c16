"""The README's two commands in a fresh clone with empty caches, then again warm; each step's time.

`make cold-check` (or `python3 scripts/cold_check.py [--root DIR] [--ref REF]`) clones REF (default
HEAD) into a new folder, points every cache the project writes at DIR (SPARKBENCH_CACHE=DIR/sparkbench,
UV_CACHE_DIR=DIR/uv, PIP_CACHE_DIR=DIR/pip; default: a new temporary folder, which must be empty), and
runs `make bench-synthetic` then `make test` there (or `--targets a,b`): the cold pass. Then a second fresh clone runs the
same two commands with the caches the first pass filled: the warm pass. It prints each command's wall
time, CPU time and load average, with make's own stage table (scripts/stage_times.py), and exits
non-zero when a command fails (`--warm-only` repeats the warm pass on filled caches). `--root ~/.cache` on a machine with no ~/.cache checks a truly new
machine and leaves its caches warm for the next user. Only the standard library: it runs before
any environment exists. Logs stay in DIR/logs.
"""

from __future__ import annotations

import argparse
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
COMMANDS = ("bench-synthetic", "test")
CACHES = {"SPARKBENCH_CACHE": "sparkbench", "UV_CACHE_DIR": "uv", "PIP_CACHE_DIR": "pip"}


def fresh_clone(ref: str, dest: Path) -> Path:
    subprocess.run(["git", "clone", "--quiet", "--no-checkout", str(REPO), str(dest)], check=True)
    subprocess.run(["git", "-C", str(dest), "checkout", "--quiet", ref], check=True)
    return dest


def children_cpu_seconds() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def timed_make(clone: Path, target: str, env: dict[str, str], log: Path) -> dict[str, float]:
    load_before, cpu_before, started = os.getloadavg()[0], children_cpu_seconds(), time.monotonic()
    with log.open("w") as out:
        code = subprocess.call(["make", target], cwd=clone, env=env, stdout=out, stderr=subprocess.STDOUT)
    return {"wall_s": time.monotonic() - started, "cpu_s": children_cpu_seconds() - cpu_before,
            "load_before": load_before, "load_after": os.getloadavg()[0], "exit": code}


def stage_table(clone: Path) -> str:
    done = subprocess.run([sys.executable, str(clone / "scripts" / "stage_times.py"), str(clone / ".stage-times.tsv"),
                           "table"], capture_output=True, text=True)
    return "\n".join("    " + line for line in done.stdout.splitlines())


def run_pass(label: str, ref: str, root: Path, env: dict[str, str], targets: list[str]) -> bool:
    clone = fresh_clone(ref, Path(tempfile.mkdtemp(prefix=f"sparkbench-{label}-")) / "clone")
    for target in targets:
        (clone / ".stage-times.tsv").write_text("")
        figures = timed_make(clone, target, env, root / "logs" / f"{label}-{target}.log")
        print(f"{label} make {target:15s} {figures['wall_s']:7.1f} s wall  {figures['cpu_s']:7.1f} s CPU  "
              f"exit {figures['exit']}  load average {figures['load_before']:.2f} -> {figures['load_after']:.2f}",
              flush=True)
        print(stage_table(clone), flush=True)
        if figures["exit"] != 0:
            print(f"{label}: make {target} failed; its log: {root / 'logs' / f'{label}-{target}.log'}", flush=True)
            return False
    return True


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--root", type=Path, help="folder for every cache (must be empty or absent)")
    parser.add_argument("--ref", default="HEAD", help="commit to check (default HEAD)")
    parser.add_argument("--targets", default=",".join(COMMANDS),
                        help="make targets, comma-separated, run in order in each pass (default: %(default)s)")
    parser.add_argument("--cold-only", action="store_true", help="skip the warm pass")
    parser.add_argument("--warm-only", action="store_true", help="only the warm pass, on caches an earlier check filled")
    args = parser.parse_args()
    root = (args.root or Path(tempfile.mkdtemp(prefix="sparkbench-cold-"))).expanduser().resolve()
    if not args.warm_only and root.exists() and any(p.name != "logs" for p in root.iterdir()):
        print(f"sparkbench: {root} is not empty; a cold check needs empty caches", file=sys.stderr)
        return 2
    (root / "logs").mkdir(parents=True, exist_ok=True)
    env = {**os.environ, **{name: str(root / sub) for name, sub in CACHES.items()}}
    commit = subprocess.run(["git", "-C", str(REPO), "rev-parse", "--short", args.ref],
                            capture_output=True, text=True, check=True).stdout.strip()
    print(f"cold check of {commit} on {os.uname().nodename}, {os.cpu_count()} cores, "
          f"{time.strftime('%Y-%m-%d %H:%M %Z')}; caches under {root}", flush=True)
    targets = [target for target in args.targets.split(",") if target]
    ok = args.warm_only or run_pass("cold", commit, root, env, targets)
    if ok and not args.cold_only:
        ok = run_pass("warm", commit, root, env, targets)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
