"""Mutation testing with cosmic-ray: each module is mutated in a copy of the committed tree (the
clone itself is never touched), its own unit tests run against every mutant, and the kill rate is
printed per module.

    python scripts/mutation.py --cosmic-ray PATH/bin/cosmic-ray \\
        harness/metrics/latency.py=tests/unit/test_metrics.py [MODULE=TEST[,TEST...] ...]

A mutant is killed when its tests fail (or time out), survives when they pass; a mutant whose
tests cannot start counts as neither. Survivors are listed with their file, line and operator.
Mutants inside a function's annotations (`str | None` made `str + None`), or a module-level
variable's, are left out before any test runs, and counted: in a module with `from __future__ import annotations` an annotation is
never evaluated, so such a mutant is equivalent (a module that hands its annotations to typer or
pydantic's `validate_call` keeps them).

`--sample N` runs a seeded random sample of N of a module's mutants (the rest are marked not
sampled and never run): cosmic-ray makes a mutant for every operator an operator may become, so a
200-line module of arithmetic has a thousand, hours on a busy host. The rate is then printed with
its 95% Wilson interval, as an estimate of the whole module's.
Exit status 0 whatever the rates: the figure is a measurement, not a gate."""

from __future__ import annotations

import argparse
import ast
import json
import math
import random
import sqlite3
import subprocess
import sys
import tarfile
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor, as_completed
from io import BytesIO
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
CONFIG = """[cosmic-ray]
module-path = "{module}"
timeout = {timeout}
excluded-modules = []
test-command = "{python} -m pytest -x -q -p no:cacheprovider {tests}"

[cosmic-ray.distributor]
name = "local"
"""


class CosmicRayFailed(RuntimeError):
    """A cosmic-ray step failed for one module (its baseline tests fail, say): that module is not measured."""


def committed_tree(into: Path) -> None:
    """The committed tree (HEAD), unpacked into `into`: others' uncommitted edits stay out of it."""
    archive = subprocess.run(["git", "-C", str(ROOT), "archive", "HEAD"], check=True, capture_output=True).stdout
    with tarfile.open(fileobj=BytesIO(archive)) as tar:
        tar.extractall(into, filter="data")


def annotation_spans(path: Path) -> list[tuple[tuple[int, int], tuple[int, int]]]:
    """(start, end) of every function annotation and module-level variable annotation in `path`, as
    (line, column); none where the module evaluates its annotations (no `from __future__ import
    annotations`, or typer/pydantic)."""
    source = path.read_text(encoding="utf-8")
    tree = ast.parse(source)
    future = any(isinstance(node, ast.ImportFrom) and node.module == "__future__"
                 and any(alias.name == "annotations" for alias in node.names) for node in tree.body)
    if not future or "typer" in source or "validate_call" in source:
        return []
    spans = [((node.annotation.lineno, node.annotation.col_offset),  # module-level `NAME: TYPE = ...`
              (node.annotation.end_lineno, node.annotation.end_col_offset))
             for node in tree.body if isinstance(node, ast.AnnAssign)]
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            args = node.args
            every = [*args.posonlyargs, *args.args, *args.kwonlyargs, args.vararg, args.kwarg]
            for annotation in [a.annotation for a in every if a is not None] + [node.returns]:
                if annotation is not None:
                    spans.append(((annotation.lineno, annotation.col_offset),
                                  (annotation.end_lineno, annotation.end_col_offset)))
    return spans


def skip_annotations(session: Path, work: Path) -> int:
    """Mark the mutants inside function annotations skipped (cosmic-ray then never runs them)."""
    with sqlite3.connect(session) as db:
        specs = db.execute("SELECT job_id, module_path, start_pos_row, start_pos_col FROM mutation_specs").fetchall()
        spans: dict[str, list] = {}
        skipped = [job for job, module, row, col in specs
                   if any(start <= (row, col) < end
                          for start, end in spans.setdefault(module, annotation_spans(work / module)))]
        db.executemany("INSERT INTO work_results (worker_outcome, output, test_outcome, diff, job_id) "
                       "VALUES ('SKIPPED', 'inside a function annotation', NULL, NULL, ?)",
                       [(job,) for job in skipped])
    return len(skipped)


def keep_a_sample(session: Path, size: int, seed: int) -> int:
    """Mark all but a seeded random `size` of the mutants still to run as not sampled; how many were."""
    with sqlite3.connect(session) as db:
        # In the order of the mutations themselves (job ids are drawn afresh by every init), so a
        # seed picks the same mutants on every run of the same source.
        pending = [job for (job,) in db.execute(
            "SELECT job_id FROM mutation_specs WHERE job_id NOT IN (SELECT job_id FROM work_results) "
            "ORDER BY module_path, start_pos_row, start_pos_col, operator_name, occurrence")]
        left_out = set(pending) - set(random.Random(seed).sample(pending, min(size, len(pending))))
        db.executemany("INSERT INTO work_results (worker_outcome, output, test_outcome, diff, job_id) "
                       "VALUES ('SKIPPED', 'not sampled', NULL, NULL, ?)", [(job,) for job in left_out])
    return len(left_out)


def wilson(killed: int, scored: int, z: float = 1.959964) -> tuple[float, float]:
    """95% Wilson interval of a kill rate."""
    if not scored:
        return math.nan, math.nan
    p = killed / scored
    centre, half = p + z * z / (2 * scored), z * math.sqrt(p * (1 - p) / scored + z * z / (4 * scored * scored))
    return (centre - half) / (1 + z * z / scored), (centre + half) / (1 + z * z / scored)


def mutate(cosmic_ray: str, module: str, tests: list[str], timeout: float, sample: int | None = None,
           seed: int = 0) -> dict:
    """Run one module's mutants in a fresh copy; the counts and the survivors."""
    with tempfile.TemporaryDirectory(prefix="sparkbench-mutation-") as tmp:
        work = Path(tmp)
        committed_tree(work)
        (work / "cr.toml").write_text(CONFIG.format(module=module, timeout=timeout, python=sys.executable,
                                                    tests=" ".join(tests)))

        def cr(*args: str) -> str:
            done = subprocess.run([cosmic_ray, *args], cwd=work, capture_output=True, text=True)
            if done.returncode != 0:
                raise CosmicRayFailed(f"cosmic-ray {args[0]} failed:\n{done.stdout}\n{done.stderr}")
            return done.stdout

        cr("init", "cr.toml", "session.sqlite")
        skip_annotations(work / "session.sqlite", work)
        if sample is not None:
            keep_a_sample(work / "session.sqlite", sample, seed)
        cr("baseline", "cr.toml")  # the tests pass on the unmutated copy, or nothing below means anything
        cr("exec", "cr.toml", "session.sqlite")
        outcomes, survivors = {"killed": 0, "survived": 0, "incompetent": 0, "annotation": 0}, []
        for line in cr("dump", "session.sqlite").splitlines():
            item, result = json.loads(line)
            if (result or {}).get("worker_outcome") == "skipped":
                outcome = "annotation" if result.get("output") == "inside a function annotation" else "not sampled"
            else:
                outcome = (result or {}).get("test_outcome") or "incompetent"
            outcomes[outcome] = outcomes.get(outcome, 0) + 1
            if outcome == "survived":
                for m in item["mutations"]:
                    survivors.append(f"{m['module_path']}:{m['start_pos'][0]} {m['operator_name']} "
                                     f"#{m['occurrence']}")
    return {"module": module, "tests": tests, **outcomes, "survivors": survivors}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cosmic-ray", required=True, help="the cosmic-ray executable")
    parser.add_argument("--timeout", type=float, default=120.0, help="seconds one mutant's tests may take")
    parser.add_argument("--sample", type=int, help="run a seeded random sample of this many mutants a module")
    parser.add_argument("--seed", type=int, default=0, help="the sample's seed")
    parser.add_argument("--jobs", type=int, default=1, help="modules mutated at once [1]")
    parser.add_argument("modules", nargs="+", help="MODULE=TEST[,TEST...]: a file or package and its tests")
    args = parser.parse_args(argv)
    specs = []
    for spec in args.modules:
        module, _, tests = spec.partition("=")
        if not tests:
            parser.error(f"{spec}: name the tests after '='")
        specs.append((module, tests.split(",")))

    def one(module: str, tests: list[str]) -> list[str]:
        started = time.monotonic()
        try:
            row = mutate(args.cosmic_ray, module, tests, args.timeout, args.sample, args.seed)
        except CosmicRayFailed as failed:  # the other modules still run
            return [f"{module}: not measured: {failed}"]
        return report(row, time.monotonic() - started)

    # Each module's mutants run one after another in a copy of its own, so modules run side by side;
    # each is printed as it ends.
    with ThreadPoolExecutor(max(1, args.jobs)) as pool:
        for done in as_completed([pool.submit(one, *spec) for spec in specs]):
            print("\n".join(done.result()), flush=True)
    return 0


def report(row: dict, seconds: float) -> list[str]:
    """A module's line (kill rate, with its interval when sampled) and its survivors'."""
    scored = row["killed"] + row["survived"]
    rate = f"{row['killed'] / scored:.1%}" if scored else "no rate: the module has no mutant to score"
    sampled = ""
    if row.get("not sampled"):
        low, high = wilson(row["killed"], scored)
        sampled = f" in a sample (95% interval {low:.1%} to {high:.1%}; {row['not sampled']} not sampled)"
    return [f"{row['module']}: {row['killed']}/{scored} mutants killed ({rate}){sampled}, "
            f"{row['incompetent']} incompetent, {row['annotation']} in annotations left out, {seconds:.0f} s",
            *(f"  survived: {survivor}" for survivor in row["survivors"])]


if __name__ == "__main__":
    sys.exit(main())
