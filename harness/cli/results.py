"""`sparkbench summarize`, `compare` and `report`: commands that read recorded runs."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Optional

import typer

from harness.cli.app import app
from harness.errors import SparkbenchError

ResultsOpt = Annotated[Path, typer.Option(help="Folder that receives results/<run_id>/.")]
ModelConfigOpt = Annotated[Optional[Path], typer.Option(
    help="The served model's config.json for the decode roofline (default: from the run's model folder).")]
PeakOpt = Annotated[Optional[float], typer.Option(
    min=0.0, help="Peak memory bandwidth of the device, GB/s (default: the known device NVML named).")]


@app.command("summarize")
def summarize(
    run_dir: Annotated[Path, typer.Argument(help="A run directory under results/.")],
    model_config: ModelConfigOpt = None,
    peak_gbps: PeakOpt = None,
) -> None:
    """Print the run's summary table (metric, stat, value, unit), its decode roofline, and its figures
    per category where its prompts carry one."""
    from harness.analysis.roofline import RooflineInputs
    from harness.analysis.run import Run
    from harness.analysis.shapes import compare_by_shape
    from harness.analysis.tables import format_run_summary

    run = Run.load(run_dir, RooflineInputs(model_config, peak_gbps))
    run.write_tables()  # tables of a run recorded before they were written at its end
    if run.record.imported:
        from harness.analysis.imported import provenance_line

        print(provenance_line(run.record.imported))
    print(format_run_summary(run, full=True))
    _print_by_category(compare_by_shape([run]))


def _print_by_category(groups) -> None:
    """Each run's figures per category, and its speed-ups against its group's baseline (nothing
    when no run's prompts carry a category)."""
    from harness.report.category_section import category_blocks, format_categories

    text = format_categories(category_blocks(groups))
    if text:
        print("\n" + text)


RunsArg = Annotated[Optional[list[Path]], typer.Argument(help="Run directories (default: the latest under --results).")]
LatestOpt = Annotated[int, typer.Option(min=1, help="How many of the latest runs to take when none are named.")]


def _runs_or_latest(runs: list[Path] | None, results: Path, latest: int) -> list[Path]:
    from harness.report.report import find_run_dirs

    chosen = list(runs or find_run_dirs(results)[-latest:])
    if not chosen:
        raise SparkbenchError(f"no run directories given and none under {results}")
    return chosen


@app.command("compare")
def compare(
    runs: RunsArg = None,
    baseline: Annotated[Optional[str], typer.Option(help="Baseline run directory or run_id (default: the first run).")] = None,
    reference: Annotated[bool, typer.Option(help="Also set the runs beside the published DGX Spark numbers.")] = False,
    results: ResultsOpt = Path("results"),
    latest: LatestOpt = 2,
) -> None:
    """Headline metrics per run with changes against the baseline and 95% intervals (McNemar for GSM8K);
    runs of different workloads or shapes are compared only within their own group; per category
    (with the speed-ups against the baseline) where the prompts carry one."""
    from harness.analysis.compare import baseline_run_id
    from harness.analysis.reference import format_reference_table, reference_table
    from harness.analysis.run import Run
    from harness.analysis.shapes import compare_by_shape, format_groups

    loaded = [Run.load(d) for d in _runs_or_latest(runs, results, latest)]
    groups = compare_by_shape(loaded, baseline_run_id(baseline))
    print(format_groups(groups))
    _print_by_category(groups)
    if reference:
        print()
        print(format_reference_table(reference_table([run.summary for run in loaded])))


@app.command("report")
def report(
    runs: RunsArg = None,
    out: Annotated[Path, typer.Option(help="Folder for report.html, report.md and plots/.")] = Path("results/report"),
    baseline: Annotated[Optional[str], typer.Option(help="Baseline run directory or run_id (default: the first run).")] = None,
    results: ResultsOpt = Path("results"),
    latest: LatestOpt = 2,
    model_config: ModelConfigOpt = None,
    peak_gbps: PeakOpt = None,
) -> None:
    """One self-contained HTML report (and Markdown) with the tables and plots of the runs; a sweep
    folder's report (its curves, speed-ups and saturation) and a gap design folder's (its cells and
    attribution) are rewritten inside the folder."""
    from harness.analysis.roofline import RooflineInputs
    from harness.report.report import build_report

    chosen = _runs_or_latest(runs, results, latest)
    reports = _own_reports(chosen, out) or [
        build_report(chosen, out, baseline=baseline, inputs=RooflineInputs(model_config, peak_gbps))]
    for html, md in reports:
        print(f"report: {html}\nmarkdown: {md}")


def _own_reports(chosen: list[Path], out: Path) -> list[tuple[Path, Path]]:
    """The reports of sweep folders, gap design folders or agreement runs, each of its own kind;
    none for benchmark runs. A kind mixed with anything else is refused."""
    from harness.agree.report import is_agreement_run, write_report
    from harness.gap.report import gap_report, is_gap_design
    from harness.sweep.outputs import is_sweep, sweep_report

    kinds = (
        (is_sweep, sweep_report, "a sweep folder has its own report, written inside it: give sweeps without runs"),
        (is_gap_design, gap_report,
         "a gap design folder (sparkbench gap) has its own report, written inside it: give gap folders without runs"),
        (is_agreement_run, lambda d: write_report(d, out / d.name),
         "agreement runs (sparkbench agree) have their own report: give them without benchmark runs"),
    )
    for belongs, write, refusal in kinds:
        matched = [d for d in chosen if belongs(d)]
        if matched and len(matched) < len(chosen):
            raise SparkbenchError(refusal)
        if matched:
            return [write(d) for d in matched]
    return []


@app.command("fidelity")
def fidelity(
    plain_run: Annotated[Path, typer.Argument(help="The plain (non-speculative) run directory.")],
    spec_run: Annotated[Path, typer.Argument(help="The speculative run of the same prompts.")],
    server: Annotated[str, typer.Option(help="The plain server's URL: it scores where the two parted.")],
    near_tie: Annotated[Optional[float], typer.Option(min=0.0, help="Largest log-probability gap, nats, that a "
                                                                   "near tie may explain (default: 1.0).")] = None,
) -> None:
    """Did speculation change an answer? Greedy pairs by prompt: identical, parted at a near tie of the
    plain model (numerics), or parted on a token plain does not tie (defect). Writes fidelity.csv and
    fidelity.json into the speculative run; exit 1 when an answer changed."""
    from harness.analysis.fidelity import NEAR_TIE_NATS
    from harness.fidelity_check import check_run_pair

    outcome = check_run_pair(plain_run, spec_run, server, NEAR_TIE_NATS if near_tie is None else near_tie)
    print(outcome["verdict"])
    if outcome["defect"]:
        raise typer.Exit(1)
