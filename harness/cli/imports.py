"""`sparkbench import`: another tool's results file as run folders that summarize and compare read."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from harness.cli.app import app
from harness.cli.results import ResultsOpt
from harness.errors import SparkbenchError


@app.command("import")
def import_results(
    file: Annotated[Path, typer.Argument(help="vllm bench serve --save-result JSON, sglang bench_serving "
                                               "--output-file JSONL, or AIPerf's profile_export.jsonl / "
                                               "profile_export_aiperf.json.")],
    results: ResultsOpt = Path("results"),
) -> None:
    """Import another tool's results: one run folder per run the file holds, with the tool's figures in
    its own definitions (per request where the tool kept them; its aggregates always)."""
    from harness.analysis.imported import provenance_line
    from harness.imports.detect import read_runs
    from harness.imports.folder import write_import
    from harness.records.rundir import load_record

    if not file.is_file():
        raise SparkbenchError(f"{file}: no such file")
    runs = read_runs(file)
    for part, imported in enumerate(runs, start=1):
        folder = write_import(imported, file, results, part if len(runs) > 1 else None)
        print(f"imported: {folder}\n{provenance_line(load_record(folder).imported)}")
