"""`sparkbench nightly`, `sweep`, `profiles` and `serve`: jobs over many runs, and the servers."""

from __future__ import annotations

import signal
import sys
from pathlib import Path
from typing import Annotated, Optional

import typer

from harness.cli.app import app
from harness.cli.binding import Group, bind, option
from harness.errors import SparkbenchError
from harness.request import TargetSpec
from harness.run.options import RunSettings
from workloads.gsm8k import GSM8KConfig
from workloads.synthetic import SyntheticConfig

ModelOpt = Annotated[Optional[Path], option(TargetSpec, "model")]


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


@app.command("nightly")
@bind(options=Group(RunSettings, skip=frozenset({"show_progress"}), overrides=True))
def nightly(
    options: dict,
    config: Annotated[Path, typer.Option(help="Nightly YAML config (see docs/nightly.md).")],
    server: Annotated[Optional[str], typer.Option(help="Override the config's server URL (every run option "
                                                       "below overrides the config's too).")] = None,
    profile: Annotated[Optional[str], typer.Option(help="Override the config's profile.")] = None,
    pin_baseline: Annotated[bool, typer.Option(help="Pin tonight's runs as the new baseline.")] = False,
) -> None:
    """Run the configured workloads, gate them against the pinned baseline, confirm any regression:
    exit 0 pass, 1 regression, 2 could not run, 3 inconclusive (host too busy to confirm)."""
    from harness.nightly.config import load_config
    from harness.nightly.job import EXIT_COULD_NOT_RUN, run_night

    try:
        settings = load_config(config, server=server, profile=profile, **options)
    except SparkbenchError as exc:
        print(f"sparkbench nightly: could not run: {exc}", file=sys.stderr)
        raise typer.Exit(EXIT_COULD_NOT_RUN) from None
    raise typer.Exit(run_night(settings, pin=pin_baseline))


@app.command("sweep")
@bind(options=Group(RunSettings, skip=frozenset({"concurrency", "request_rate", "show_progress"}), overrides=True))
def sweep(
    options: dict,
    config: Annotated[Optional[Path], typer.Option(help="Sweep YAML config (see docs/sweeps.md); "
                                                        "or give the matrix with the flags below.")] = None,
    concurrency: Annotated[Optional[str], typer.Option(help="Concurrency levels, comma-separated [1,2,4,8].")] = None,
    request_rate: Annotated[Optional[str], typer.Option(help="Arrival rates, requests/s, comma-separated: one "
                                                             "open-loop cell per rate instead of concurrency levels.")] = None,
    server: Annotated[Optional[list[str]], typer.Option(help="A server URL; repeat for several configurations.")] = None,
    profile: Annotated[Optional[list[str]], typer.Option(help="A profile (checked on the --server of the same "
                                                              "position, else launched); repeatable.")] = None,
    workload: Annotated[str, typer.Option(help="synthetic or gsm8k.")] = "synthetic",
    num_prompts: Annotated[Optional[int], option(SyntheticConfig, "num_prompts")] = None,
    input_tokens: Annotated[Optional[int], option(SyntheticConfig, "input_tokens")] = None,
    output_tokens: Annotated[Optional[int], option(SyntheticConfig, "output_tokens")] = None,
    tokenizer: Annotated[Optional[Path], option(SyntheticConfig, "tokenizer")] = None,
    limit: Annotated[Optional[int], option(GSM8KConfig, "limit")] = None,
    max_new_tokens: Annotated[Optional[int], option(GSM8KConfig, "max_new_tokens")] = None,
    name: Annotated[Optional[str], typer.Option(help="Sweep name, the start of its folder's [sweep].")] = None,
    baseline: Annotated[Optional[str], typer.Option(help="Configuration the speed-ups are against [the first].")] = None,
    results: Annotated[Optional[Path], typer.Option(help="Folder that receives <name>-<time>/ [results/sweeps].")] = None,
    guard: Annotated[Optional[bool], typer.Option("--guard/--no-guard", help="Check servers against profiles.")] = None,
    ray: Annotated[Optional[str], typer.Option(help="Run the cells as tasks on this Ray cluster (auto, HOST:PORT, "
                                                    "ray://HOST:PORT, or local); needs the `ray` extra.")] = None,
    resume: Annotated[Optional[Path], typer.Option(help="Continue this sweep folder: only unfinished cells run.")] = None,
) -> None:
    """A matrix of configurations x workloads x concurrency levels (or arrival rates); each cell an ordinary run.
    Exit 0 when every cell completed, 1 when a cell failed (recorded; --resume retries it), 2 bad input."""
    from harness.sweep.outputs import print_sweep
    from harness.sweep.run import execute
    from harness.sweep.setup import open_sweep

    matrix = {"concurrency": concurrency, "request_rate": request_rate, "server": server, "profile": profile, "workload": workload,
              "options": {"num_prompts": num_prompts, "input_tokens": input_tokens, "output_tokens": output_tokens,
                          "tokenizer": tokenizer, "limit": limit, "max_new_tokens": max_new_tokens}}
    settings = {"name": name, "baseline": baseline, "results": results, "guard": guard, **options}
    opened, address = open_sweep(config, resume, matrix, settings, ray)
    status = execute(opened, address)
    print_sweep(opened)
    raise typer.Exit(0 if status == "complete" else 1)
