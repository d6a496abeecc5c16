"""`sparkbench sweep` against the session's real SGLang server: locally in order, and as tasks on a
real local Ray cluster with one cell that cannot reach its server."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import pytest

from harness.analysis.run import Run
from harness.sweep.sweepdir import SweepDir
from tests.e2e.conftest import LiveServer, sparkbench

pytestmark = pytest.mark.e2e
SHAPE = ["--num-prompts", "2", "--input-tokens", "64", "--output-tokens", "16"]


def _only_sweep(results: Path) -> SweepDir:
    [folder] = list(results.iterdir())
    return SweepDir.load(folder)


def _cell_run(sweep: SweepDir, cell_id: str) -> Run:
    return Run.load(sweep.run_dirs()[cell_id])


def test_a_local_sweep_makes_one_ordinary_run_per_level_and_resume_sends_nothing_more(sglang_server: LiveServer,
                                                                                     tmp_path):
    done = sparkbench("sweep", "--server", sglang_server.base_url, "--tokenizer", str(sglang_server.model_dir),
                      "--concurrency", "1,2", *SHAPE, "--name", "local", "--results", str(tmp_path))
    assert done.returncode == 0, done.stderr
    sweep = _only_sweep(tmp_path)
    name = sweep.config.configurations[0].name
    curves = pd.read_csv(sweep.path / "curves.csv").set_index("concurrency")
    for level in (1, 2):
        run = _cell_run(sweep, f"{name}.synthetic.c{level}")
        assert run.manifest["status"] == "complete" and run.manifest["options"]["concurrency"] == level
        assert run.manifest["label"] == f"{name} c={level}"
        assert (run.requests["status"] == "ok").sum() == 2
        values = run.summary.set_index(["metric", "stat"])["value"]
        assert curves.loc[level, "output_tok_s"] == pytest.approx(values[("output_throughput", "value")])
        # A level whose every stream was flagged (a busy host) has no TPOT, and its curve says so too.
        assert curves.loc[level, "tpot_p50_ms"] == pytest.approx(values[("tpot_ms", "p50")], nan_ok=True)
    again = sparkbench("sweep", "--resume", str(sweep.path))
    assert again.returncode == 0, again.stderr
    assert [p.name for p in (sweep.path / "cells").iterdir() for _ in p.iterdir()] == \
        [p.name for p in (sweep.path / "cells").iterdir()]  # still one run directory per cell
    assert "sweep: cell" not in again.stderr  # no cell ran again


def test_cells_run_as_ray_tasks_and_a_failing_cell_loses_nothing_else(sglang_server: LiveServer, tmp_path):
    pytest.importorskip("ray")
    config = tmp_path / "sweep.yaml"
    config.write_text(
        f"name: on-ray\nresults: {tmp_path / 'results'}\nconcurrency: [2]\n"
        f"configurations:\n  - {{name: real, server: '{sglang_server.base_url}'}}\n"
        "  - {name: gone, server: 'http://127.0.0.1:9'}\n"
        "workloads:\n  - name: synthetic\n    options: {num_prompts: 2, input_tokens: 64, output_tokens: 16, "
        f"tokenizer: '{sglang_server.model_dir}'}}\n"
        "ray: {address: local, local_cpus: 2, num_cpus: 1}\n")
    done = sparkbench("sweep", "--config", str(config))
    assert done.returncode == 1, done.stderr
    sweep = _only_sweep(tmp_path / "results")
    assert sweep.record.runs[0].executor["kind"] == "ray"
    cells = sweep.record.cells
    assert cells["gone.synthetic.c2"].status == "failed"
    assert "cannot reach http://127.0.0.1:9" in cells["gone.synthetic.c2"].error
    assert cells["real.synthetic.c2"].status == "complete"
    run = _cell_run(sweep, "real.synthetic.c2")
    assert (run.requests["status"] == "ok").sum() == 2 and run.manifest["options"]["concurrency"] == 2
