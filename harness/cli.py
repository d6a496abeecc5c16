"""The `sparkbench` command line: thin typed wrappers over the stage modules."""

from __future__ import annotations

import signal
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Optional

import typer
from pydantic import BaseModel

from harness.config import bounds
from harness.errors import SparkbenchError, describe_os_error
from harness.run.runner import RunOptions
from harness.secrets import api_key, auth_headers, redact
from workloads import WorkloadConfig
from workloads.gsm8k import GSM8KConfig
from workloads.synthetic import SyntheticConfig

app = typer.Typer(help="Decode-speed and accuracy benchmarks for LLM inference servers.",
                  no_args_is_help=True, pretty_exceptions_enable=False, add_completion=False,
                  rich_markup_mode=None)  # plain click output: errors are short, help is greppable
run_app = typer.Typer(help="Run a workload against a server and record every request.", no_args_is_help=True,
                      rich_markup_mode=None)
app.add_typer(run_app, name="run")

ServerOpt = Annotated[Optional[str], typer.Option(
    "--server", help="Base URL of a running server (e.g. http://127.0.0.1:30000). "
                     "Omitted: start --profile (default: the embedded CPU test bed, reduced scale).")]
ProfileOpt = Annotated[Optional[str], typer.Option(
    help="Server profile (see `sparkbench profiles`): what the server must run; launched when no --server.")]
ModelOpt = Annotated[Optional[Path], typer.Option(help="Model folder to serve when launching a profile "
                                                       "(default: the test bed's tiny model).")]
GuardOpt = Annotated[bool, typer.Option("--guard/--no-guard", help="Check the server against the profile first.")]
AllowBufferedOpt = Annotated[bool, typer.Option(
    "--allow-buffered", help="Measure even if the guard's canary request does not stream its tokens as they are made "
                             "(recorded in the manifest; such requests stay out of client TTFT, TPOT and ITL).")]
BackendOpt = Annotated[str, typer.Option(help="sglang (native /generate), openai (/v1/completions) or auto.")]
ServedModelOpt = Annotated[Optional[str], typer.Option(help="Model name for the OpenAI API (default: the first listed).")]
WarmupOpt = Annotated[int, typer.Option(help=RunOptions.model_fields["warmup"].description,
                                        **bounds(RunOptions, "warmup"))]
ConcurrencyOpt = Annotated[int, typer.Option(help=RunOptions.model_fields["concurrency"].description,
                                             **bounds(RunOptions, "concurrency"))]
ProcessesOpt = Annotated[int, typer.Option(help=RunOptions.model_fields["processes"].description,
                                           **bounds(RunOptions, "processes"))]
ResultsOpt = Annotated[Path, typer.Option(help="Folder that receives results/<run_id>/.")]
TimeoutOpt = Annotated[float, typer.Option(help=RunOptions.model_fields["request_timeout_s"].description,
                                           **bounds(RunOptions, "request_timeout_s"))]
ProgressOpt = Annotated[bool, typer.Option(help="Show the progress bar.")]
ModelConfigOpt = Annotated[Optional[Path], typer.Option(
    help="The served model's config.json for the decode roofline (default: from the run's model folder).")]
PeakOpt = Annotated[Optional[float], typer.Option(
    min=0.0, help="Peak memory bandwidth of the device, GB/s (default: the known device NVML named).")]
def _run_option(field: str, flag: str) -> typer.models.OptionInfo:
    return typer.Option(flag, help=RunOptions.model_fields[field].description, **bounds(RunOptions, field))


MaxErrorsOpt = Annotated[Optional[int], _run_option("max_errors", "--max-errors")]
FirstTokenOpt = Annotated[Optional[float], _run_option("first_token_timeout_s", "--first-token-timeout")]
DeadlineOpt = Annotated[Optional[float], _run_option("request_deadline_s", "--request-deadline")]
GraceOpt = Annotated[float, _run_option("unreachable_grace_s", "--unreachable-grace")]
ApiKeyOpt = Annotated[Optional[str], typer.Option(
    "--api-key", help="Key sent as `Authorization: Bearer` (default: $SPARKBENCH_API_KEY, then $OPENAI_API_KEY); "
                      "never written to the run.")]
ResumeOpt = Annotated[Optional[Path], typer.Option(
    help="Continue this stopped run: same workload, only the prompts without an ok record are sent.")]
LabelOpt = Annotated[Optional[str], typer.Option(
    help="Name of the run in tables, figures and reports (default: profile or engine and concurrency, "
         "e.g. 'cpu-testbed c=1'); stored in the manifest.")]
PowerOpt = Annotated[int, typer.Option(min=0, help="Sample device power (NVML GPUs, RAPL CPU packages) every N ms "
                                                  "during the measured requests; 0 = off.")]


def default(model: type[BaseModel], field: str):
    return model.model_fields[field].default


@dataclass(frozen=True)
class Common:
    """The options every workload command shares."""

    server: str | None
    profile: str | None
    model: Path | None
    guard: bool
    backend: str
    served_model: str | None
    warmup: int
    concurrency: int
    results: Path
    request_timeout: float
    progress: bool
    keep_prefix_cache: bool = False
    power_sample_ms: int = 100
    faults: Faults | None = None
    allow_buffered: bool = False
    label: str | None = None
    processes: int = 1

    def options(self, base_url: str) -> RunOptions:
        faults = self.faults or Faults()
        if self.processes > self.concurrency:
            raise SparkbenchError(f"--processes {self.processes} is more than --concurrency {self.concurrency}: "
                                  "each client process needs a request in flight")
        return RunOptions(base_url=base_url, warmup=self.warmup, concurrency=self.concurrency, processes=self.processes,
                          request_timeout_s=self.request_timeout, show_progress=self.progress,
                          power_interval_s=self.power_sample_ms / 1000, max_errors=faults.max_errors,
                          first_token_timeout_s=faults.first_token_timeout, request_deadline_s=faults.request_deadline,
                          unreachable_grace_s=faults.unreachable_grace, headers=auth_headers(api_key(faults.api_key)))


@dataclass(frozen=True)
class Faults:
    """What a run tolerates, and how it continues (the options of failure handling)."""

    max_errors: int | None = None
    first_token_timeout: float | None = None
    request_deadline: float | None = None
    unreachable_grace: float = default(RunOptions, "unreachable_grace_s")
    api_key: str | None = None
    resume: Path | None = None


def _run(common: Common, workload: str, workload_options: dict, chat: bool = False) -> None:
    """Start or attach to the server, build the named workload for its scale, and run it."""
    from harness.analysis.run import Run
    from harness.analysis.tables import format_run_summary
    from harness.run.bench import backend_for, run_workload, target_server
    from harness.run.label import checked_label
    from harness.run.resume import resumed_options
    from workloads.registry import config_of, entry, plan

    label = checked_label(common.label)
    resume = common.faults.resume if common.faults else None
    if resume is not None:
        defaults = {key: default(entry(workload).config, key) for key in workload_options}
        workload_options = resumed_options(resume, workload, workload_options, defaults)
    config = config_of(workload, workload_options)  # a bad option fails before any server starts
    with target_server(common.server, common.profile, common.model) as target:
        backend = backend_for(target, common.backend, chat=chat, model=common.served_model)
        chosen = plan(workload, config, target.reduced, target.model_dir)
        run = run_workload(target, backend, chosen, common.options(target.base_url), common.results,
                           guard=common.guard, keep_prefix_cache=common.keep_prefix_cache, resume=resume,
                           allow_buffered=common.allow_buffered, label=label)
    print(format_run_summary(Run.load(run.path)))


S, G, R = SyntheticConfig, GSM8KConfig, RunOptions


def bound(model: type[WorkloadConfig], field: str) -> typer.models.OptionInfo:
    """A typer option bound to a workload config field: its description with the scale defaults,
    and its bounds."""
    return typer.Option(help=model.help(field), **bounds(model, field))


@run_app.command("synthetic")
def run_synthetic(
    server: ServerOpt = None,
    num_prompts: Annotated[Optional[int], bound(S, "num_prompts")] = None,
    input_tokens: Annotated[Optional[int], bound(S, "input_tokens")] = None,
    output_tokens: Annotated[Optional[int], bound(S, "output_tokens")] = None,
    seed: Annotated[int, bound(S, "seed")] = default(S, "seed"),
    salt: Annotated[Optional[int], bound(S, "salt")] = None,
    tokenizer: Annotated[Optional[Path], bound(S, "tokenizer")] = None,
    keep_prefix_cache: Annotated[bool, typer.Option(help="Do not flush the server's prefix cache before measuring "
                                                         "(SGLang /flush_cache; the guard still checks cached_tokens).")] = False,
    profile: ProfileOpt = None, model: ModelOpt = None, guard: GuardOpt = True,
    allow_buffered: AllowBufferedOpt = False, backend: BackendOpt = "auto", served_model: ServedModelOpt = None,
    warmup: WarmupOpt = default(R, "warmup"), concurrency: ConcurrencyOpt = default(R, "concurrency"),
    processes: ProcessesOpt = default(R, "processes"), results: ResultsOpt = Path("results"),
    request_timeout: TimeoutOpt = default(R, "request_timeout_s"),
    progress: ProgressOpt = True, power_sample_ms: PowerOpt = 100,
    max_errors: MaxErrorsOpt = None, first_token_timeout: FirstTokenOpt = None, request_deadline: DeadlineOpt = None,
    unreachable_grace: GraceOpt = default(R, "unreachable_grace_s"), api_key: ApiKeyOpt = None,
    resume: ResumeOpt = None, label: LabelOpt = None,
) -> None:
    """Synthetic decode: random-token prompts, fixed output length, greedy, ignore_eos."""
    faults = Faults(max_errors, first_token_timeout, request_deadline, unreachable_grace, api_key, resume)
    common = Common(server, profile, model, guard, backend, served_model, warmup, concurrency, results,
                    request_timeout, progress, keep_prefix_cache, power_sample_ms, faults, allow_buffered, label,
                    processes)
    _run(common, "synthetic", {"num_prompts": num_prompts, "input_tokens": input_tokens,
                               "output_tokens": output_tokens, "seed": seed, "salt": salt, "tokenizer": tokenizer})


@run_app.command("gsm8k")
def run_gsm8k(
    server: ServerOpt = None,
    limit: Annotated[Optional[int], bound(G, "limit")] = None,
    offset: Annotated[int, bound(G, "offset")] = default(G, "offset"),
    shuffle: Annotated[bool, bound(G, "shuffle")] = default(G, "shuffle"),
    shuffle_seed: Annotated[int, bound(G, "shuffle_seed")] = default(G, "shuffle_seed"),
    shot_seed: Annotated[int, bound(G, "shot_seed")] = default(G, "shot_seed"),
    chat: Annotated[bool, bound(G, "chat")] = default(G, "chat"),
    source: Annotated[str, bound(G, "source")] = default(G, "source"),
    temperature: Annotated[float, bound(G, "temperature")] = default(G, "temperature"),
    top_p: Annotated[float, bound(G, "top_p")] = default(G, "top_p"),
    top_k: Annotated[int, bound(G, "top_k")] = default(G, "top_k"),
    max_new_tokens: Annotated[Optional[int], bound(G, "max_new_tokens")] = None,
    base_seed: Annotated[int, bound(G, "base_seed")] = default(G, "base_seed"),
    profile: ProfileOpt = None, model: ModelOpt = None, guard: GuardOpt = True,
    allow_buffered: AllowBufferedOpt = False, backend: BackendOpt = "auto", served_model: ServedModelOpt = None,
    warmup: WarmupOpt = default(R, "warmup"), concurrency: ConcurrencyOpt = default(R, "concurrency"),
    processes: ProcessesOpt = default(R, "processes"), results: ResultsOpt = Path("results"),
    request_timeout: TimeoutOpt = default(R, "request_timeout_s"),
    progress: ProgressOpt = True, power_sample_ms: PowerOpt = 100,
    max_errors: MaxErrorsOpt = None, first_token_timeout: FirstTokenOpt = None, request_deadline: DeadlineOpt = None,
    unreachable_grace: GraceOpt = default(R, "unreachable_grace_s"), api_key: ApiKeyOpt = None,
    resume: ResumeOpt = None, label: LabelOpt = None,
) -> None:
    """GSM8K: five-shot chain-of-thought, published sampling; accuracy and speed from the same requests."""
    faults = Faults(max_errors, first_token_timeout, request_deadline, unreachable_grace, api_key, resume)
    common = Common(server, profile, model, guard, backend, served_model, warmup, concurrency, results,
                    request_timeout, progress, power_sample_ms=power_sample_ms, faults=faults,
                    allow_buffered=allow_buffered, label=label, processes=processes)
    _run(common, "gsm8k", {"limit": limit, "offset": offset, "shuffle": shuffle, "shuffle_seed": shuffle_seed,
                           "shot_seed": shot_seed, "chat": chat, "source": source, "temperature": temperature,
                           "top_p": top_p, "top_k": top_k, "max_new_tokens": max_new_tokens,
                           "base_seed": base_seed}, chat=chat)


@app.command("summarize")
def summarize(
    run_dir: Annotated[Path, typer.Argument(help="A run directory under results/.")],
    model_config: ModelConfigOpt = None,
    peak_gbps: PeakOpt = None,
) -> None:
    """Print the run's summary table (metric, stat, value, unit) and its decode roofline."""
    from harness.analysis.roofline import RooflineInputs
    from harness.analysis.run import Run
    from harness.analysis.tables import format_run_summary

    run = Run.load(run_dir, RooflineInputs(model_config, peak_gbps))
    run.write_tables()  # tables of a run recorded before they were written at its end
    print(format_run_summary(run, full=True))


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
    runs of different workloads or shapes are compared only within their own group."""
    from harness.analysis.compare import baseline_run_id
    from harness.analysis.reference import format_reference_table, reference_table
    from harness.analysis.run import Run
    from harness.analysis.shapes import compare_by_shape, format_groups

    loaded = [Run.load(d) for d in _runs_or_latest(runs, results, latest)]
    print(format_groups(compare_by_shape(loaded, baseline_run_id(baseline))))
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
    folder's report (its curves, speed-ups and saturation) is rewritten inside the folder."""
    from harness.agree.report import is_agreement_run, write_report
    from harness.analysis.roofline import RooflineInputs
    from harness.report.report import build_report
    from harness.sweep.outputs import is_sweep, sweep_report

    chosen = _runs_or_latest(runs, results, latest)
    sweeps = [d for d in chosen if is_sweep(d)]
    if sweeps and len(sweeps) < len(chosen):
        raise SparkbenchError("a sweep folder has its own report, written inside it: give sweeps without runs")
    agreement = [d for d in chosen if not sweeps and is_agreement_run(d)]
    if agreement and len(agreement) < len(chosen):
        raise SparkbenchError("agreement runs (sparkbench agree) have their own report: give them without benchmark runs")
    reports = [write_report(d, out / d.name) for d in agreement] or [sweep_report(d) for d in sweeps] or [
        build_report(chosen, out, baseline=baseline, inputs=RooflineInputs(model_config, peak_gbps))]
    for html, md in reports:
        print(f"report: {html}\nmarkdown: {md}")


@app.command("agree")
def agree(
    reference: Annotated[str, typer.Option(help="Base URL of the reference server (e.g. the BF16 head).")],
    candidate: Annotated[str, typer.Option(help="Base URL of the candidate server (e.g. the FP8 head).")],
    source: Annotated[str, typer.Option(help="Continuation scored after each GSM8K prompt: answers (the "
                                             "reference answers) or greedy (the reference server's own).")] = "answers",
    limit: Annotated[Optional[int], typer.Option(min=1, help="Questions to score [all 1,319].")] = None,
    offset: Annotated[int, typer.Option(min=0, help="First test question.")] = 0,
    shot_seed: Annotated[int, typer.Option(help="Seed that draws the five shots from the TRAIN split.")] = 1234,
    max_new_tokens: Annotated[int, typer.Option(min=1, help="Greedy continuation length (source greedy).")] = 256,
    top_k: Annotated[int, typer.Option(min=2, max=20, help="Top-k returned at every position.")] = 10,
    tokenizer: Annotated[Optional[Path], typer.Option(help="Local tokenizer folder of the served model "
                                                           "(default: the reference's model folder).")] = None,
    results: Annotated[Path, typer.Option(help="Folder that receives <run_id>/ (kept apart from benchmark "
                                               "runs, which compare and report read).")] = Path("results/agree"),
    request_timeout: TimeoutOpt = 600.0,
) -> None:
    """Top-k agreement: both servers score the same teacher-forced token sequences, position by position."""
    from harness.agree.report import headline, write_report
    from harness.agree.run import AgreeOptions, run_agreement

    options = AgreeOptions(source=source, limit=limit, offset=offset, shot_seed=shot_seed,
                           max_new_tokens=max_new_tokens, top_k=top_k, tokenizer=tokenizer,
                           request_timeout_s=request_timeout)
    run = run_agreement({"reference": reference, "candidate": candidate}, options, results)
    html, _ = write_report(run.path)
    print(f"{headline(run.path)}\nrun: {run.path}\nreport: {html}")


@app.command("profiles")
def profiles() -> None:
    """List the server profiles and what each one checks."""
    from harness.guard.profiles import list_profiles

    for profile in list_profiles():
        checks = ", ".join(sorted(profile.expect)) or "nothing"
        canary = "; canary: streams as made" + (f", accept length > {profile.canary.min_accept_length}"
                                                if profile.canary else "")
        print(f"{profile.name}  [{profile.engine}]\n    {profile.description}\n    checks: {checks}{canary}")


@app.command("serve")
def serve(
    profile: Annotated[str, typer.Option(help="Server profile to launch (see `sparkbench profiles`).")] = "cpu-testbed",
    model: ModelOpt = None,
) -> None:
    """Launch a server from a profile, wait until it is healthy, and keep it up until Ctrl-C."""
    from harness.run.embedded import embedded_server

    with embedded_server(profile, model_dir=model, log_name=f"serve-{profile}") as server:
        print(f"{server.profile} ({server.engine}) serving {server.model_dir} at {server.base_url}; "
              f"log {server.log_path}; Ctrl-C stops it", flush=True)
        try:
            signal.pause()
        except KeyboardInterrupt:
            pass


@app.command("check")
def check(
    profile: Annotated[str, typer.Option(help="Profile the server must be running.")],
    server: Annotated[str, typer.Option(help="Base URL of the running server.")],
    backend: BackendOpt = "auto",
    model: ModelOpt = None,
    allow_buffered: AllowBufferedOpt = False,
) -> None:
    """Run the configuration guard alone against a running server; exit 0 only if every check passes."""
    from harness.guard.preflight import startup_guard
    from harness.run.bench import backend_for, target_server
    from harness.run.runner import snapshot_server

    with target_server(server, profile) as target:
        client = backend_for(target, backend)
        report = startup_guard(target.profile, client, target.base_url, snapshot_server(client, target.base_url),
                               model, allow_buffered=allow_buffered)
    print("\n".join(report.format_lines()))


@app.command("nightly")
def nightly(
    config: Annotated[Path, typer.Option(help="Nightly YAML config (see docs/nightly.md).")],
    server: Annotated[Optional[str], typer.Option(help="Override the config's server URL.")] = None,
    profile: Annotated[Optional[str], typer.Option(help="Override the config's profile.")] = None,
    pin_baseline: Annotated[bool, typer.Option(help="Pin tonight's runs as the new baseline.")] = False,
) -> None:
    """Run the configured workloads, gate them against the pinned baseline, confirm any regression:
    exit 0 pass, 1 regression, 2 could not run, 3 inconclusive (host too busy to confirm)."""
    from harness.nightly.config import load_config
    from harness.nightly.job import EXIT_COULD_NOT_RUN, run_night

    try:
        settings = load_config(config, server=server, profile=profile)
    except SparkbenchError as exc:
        print(f"sparkbench nightly: could not run: {exc}", file=sys.stderr)
        raise typer.Exit(EXIT_COULD_NOT_RUN) from None
    raise typer.Exit(run_night(settings, pin=pin_baseline))


@app.command("sweep")
def sweep(
    config: Annotated[Optional[Path], typer.Option(help="Sweep YAML config (see docs/sweeps.md); "
                                                        "or give the matrix with the flags below.")] = None,
    concurrency: Annotated[Optional[str], typer.Option(help="Concurrency levels, comma-separated [1,2,4,8].")] = None,
    server: Annotated[Optional[list[str]], typer.Option(help="A server URL; repeat for several configurations.")] = None,
    profile: Annotated[Optional[list[str]], typer.Option(help="A profile (checked on the --server of the same "
                                                              "position, else launched); repeatable.")] = None,
    workload: Annotated[str, typer.Option(help="synthetic or gsm8k.")] = "synthetic",
    num_prompts: Annotated[Optional[int], bound(S, "num_prompts")] = None,
    input_tokens: Annotated[Optional[int], bound(S, "input_tokens")] = None,
    output_tokens: Annotated[Optional[int], bound(S, "output_tokens")] = None,
    tokenizer: Annotated[Optional[Path], bound(S, "tokenizer")] = None,
    limit: Annotated[Optional[int], bound(G, "limit")] = None,
    max_new_tokens: Annotated[Optional[int], bound(G, "max_new_tokens")] = None,
    name: Annotated[Optional[str], typer.Option(help="Sweep name, the start of its folder's [sweep].")] = None,
    baseline: Annotated[Optional[str], typer.Option(help="Configuration the speed-ups are against [the first].")] = None,
    results: Annotated[Optional[Path], typer.Option(help="Folder that receives <name>-<time>/ [results/sweeps].")] = None,
    warmup: Annotated[Optional[int], typer.Option(min=0, help="Warm-up requests per cell [1].")] = None,
    guard: Annotated[Optional[bool], typer.Option("--guard/--no-guard", help="Check servers against profiles.")] = None,
    ray: Annotated[Optional[str], typer.Option(help="Run the cells as tasks on this Ray cluster (auto, HOST:PORT, "
                                                    "ray://HOST:PORT, or local); needs the `ray` extra.")] = None,
    resume: Annotated[Optional[Path], typer.Option(help="Continue this sweep folder: only unfinished cells run.")] = None,
) -> None:
    """A matrix of configurations x workloads x concurrency levels; each cell an ordinary run.
    Exit 0 when every cell completed, 1 when a cell failed (recorded; --resume retries it), 2 bad input."""
    from harness.sweep.outputs import print_sweep
    from harness.sweep.run import execute
    from harness.sweep.setup import open_sweep

    matrix = {"concurrency": concurrency, "server": server, "profile": profile, "workload": workload,
              "options": {"num_prompts": num_prompts, "input_tokens": input_tokens, "output_tokens": output_tokens,
                          "tokenizer": tokenizer, "limit": limit, "max_new_tokens": max_new_tokens}}
    settings = {"name": name, "baseline": baseline, "results": results, "warmup": warmup, "guard": guard}
    opened, address = open_sweep(config, resume, matrix, settings, ray)
    status = execute(opened, address)
    print_sweep(opened)
    raise typer.Exit(0 if status == "complete" else 1)


def _terminate_as_interrupt(signum, frame) -> None:
    raise KeyboardInterrupt  # SIGTERM ends a run like Ctrl-C: records kept, servers stopped


def main() -> None:
    signal.signal(signal.SIGTERM, _terminate_as_interrupt)
    try:
        app()
    except SparkbenchError as exc:
        print(f"sparkbench: {redact(str(exc))}", file=sys.stderr)
        sys.exit(exc.exit_code)
    except OSError as exc:  # a file the user named cannot be read or written: say which and why
        print(f"sparkbench: {redact(describe_os_error(exc))}", file=sys.stderr)
        sys.exit(SparkbenchError.exit_code)


if __name__ == "__main__":
    main()
