"""The `sparkbench` command line: thin typed wrappers over the stage modules."""

from __future__ import annotations

import signal
import sys
from pathlib import Path
from typing import Annotated, Optional

import typer

from harness.errors import SparkbenchError

app = typer.Typer(help="Decode-speed and accuracy benchmarks for LLM inference servers.",
                  no_args_is_help=True, pretty_exceptions_enable=False, add_completion=False)
run_app = typer.Typer(help="Run a workload against a server and record every request.", no_args_is_help=True)
app.add_typer(run_app, name="run")

ServerOpt = Annotated[Optional[str], typer.Option(
    "--server", help="Base URL of a running server (e.g. http://127.0.0.1:30000). "
                     "Omitted: start the embedded CPU test-bed server at reduced scale.")]
WarmupOpt = Annotated[int, typer.Option(min=0, help="Warm-up requests before measuring (not recorded).")]
ConcurrencyOpt = Annotated[int, typer.Option(min=1, help="Requests in flight at once (1 = batch 1, as published).")]
ResultsOpt = Annotated[Path, typer.Option(help="Folder that receives results/<run_id>/.")]
TimeoutOpt = Annotated[float, typer.Option(min=1.0, help="Seconds a request may go without any data.")]
ProgressOpt = Annotated[bool, typer.Option(help="Show the progress bar.")]


def _options(base_url: str, warmup: int, concurrency: int, timeout: float, progress: bool):
    from harness.runner import RunOptions

    return RunOptions(base_url=base_url, warmup=warmup, concurrency=concurrency,
                      request_timeout_s=timeout, show_progress=progress)


@run_app.command("synthetic")
def run_synthetic(
    server: ServerOpt = None,
    num_prompts: Annotated[Optional[int], typer.Option(min=1, help="Measured requests [published shape: 10; embedded: 8].")] = None,
    input_tokens: Annotated[Optional[int], typer.Option(min=2, help="Prompt length in tokens [32768; embedded: 8192].")] = None,
    output_tokens: Annotated[Optional[int], typer.Option(min=1, help="Generated tokens per request [2048; embedded: 512].")] = None,
    seed: Annotated[int, typer.Option(help="Seed of the prompt bodies.")] = 0,
    salt: Annotated[Optional[int], typer.Option(help="Seed of the distinct first tokens (default: fresh per run, recorded).")] = None,
    tokenizer: Annotated[Optional[Path], typer.Option(help="Local tokenizer folder of the served model (default: the server's tokenizer_path).")] = None,
    warmup: WarmupOpt = 1,
    concurrency: ConcurrencyOpt = 1,
    results: ResultsOpt = Path("results"),
    request_timeout: TimeoutOpt = 900.0,
    progress: ProgressOpt = True,
) -> None:
    """Synthetic decode: random-token prompts, fixed output length, greedy, ignore_eos."""
    from harness.bench import backend_for, run_workload, target_server
    from harness.tables import print_run_summary
    from workloads.synthetic import make_synthetic

    with target_server(server) as target:
        reduced = target.embedded is not None
        make = make_synthetic(num_prompts=num_prompts or (8 if reduced else 10),
                              input_tokens=input_tokens or (8192 if reduced else 32768),
                              output_tokens=output_tokens or (512 if reduced else 2048),
                              seed=seed, salt=salt, tokenizer=tokenizer)
        run = run_workload(target, backend_for("sglang"), make,
                           _options(target.base_url, warmup, concurrency, request_timeout, progress), results)
    print_run_summary(run.path)


@run_app.command("gsm8k")
def run_gsm8k(
    server: ServerOpt = None,
    limit: Annotated[Optional[int], typer.Option(min=0, help="Questions to send [all 1,319; embedded: 20].")] = None,
    offset: Annotated[int, typer.Option(min=0, help="First test question to send.")] = 0,
    shuffle: Annotated[bool, typer.Option(help="Send the questions in a seeded random order.")] = False,
    shuffle_seed: Annotated[int, typer.Option(help="Seed of --shuffle.")] = 0,
    shot_seed: Annotated[int, typer.Option(help="Seed that draws the five shots from the TRAIN split.")] = 1234,
    chat: Annotated[bool, typer.Option(help="Send the prompt as one chat user message (OpenAI chat API).")] = False,
    source: Annotated[str, typer.Option(help="vendored (offline copy) or hub (openai/gsm8k via datasets).")] = "vendored",
    temperature: Annotated[float, typer.Option(min=0.0, help="Sampling temperature [published: 0.6].")] = 0.6,
    top_p: Annotated[float, typer.Option(min=0.0, max=1.0, help="Nucleus sampling [published: 0.95].")] = 0.95,
    top_k: Annotated[int, typer.Option(help="Top-k sampling, -1 off [published: 29].")] = 29,
    max_new_tokens: Annotated[Optional[int], typer.Option(min=1, help="Token cap per answer [32768; embedded: 128].")] = None,
    base_seed: Annotated[int, typer.Option(help="Request seed = base seed + question index.")] = 0,
    warmup: WarmupOpt = 1,
    concurrency: ConcurrencyOpt = 1,
    results: ResultsOpt = Path("results"),
    request_timeout: TimeoutOpt = 900.0,
    progress: ProgressOpt = True,
) -> None:
    """GSM8K: five-shot chain-of-thought, published sampling; accuracy and speed from the same requests."""
    from harness.bench import backend_for, run_workload, target_server
    from harness.tables import print_run_summary
    from workloads.gsm8k import GSM8KWorkload

    with target_server(server) as target:
        reduced = target.embedded is not None
        workload = GSM8KWorkload(
            limit=limit if limit is not None else (20 if reduced else None), offset=offset, shuffle=shuffle,
            shuffle_seed=shuffle_seed, shot_seed=shot_seed, chat=chat, source=source, temperature=temperature,
            top_p=top_p, top_k=top_k, max_new_tokens=max_new_tokens or (128 if reduced else 32768),
            base_seed=base_seed)
        run = run_workload(target, backend_for("sglang"), lambda snapshot: workload,
                           _options(target.base_url, warmup, concurrency, request_timeout, progress), results)
    print_run_summary(run.path)


@app.command("summarize")
def summarize(run_dir: Annotated[Path, typer.Argument(help="A run directory under results/.")]) -> None:
    """Print the run's summary table (metric, stat, value, unit)."""
    from harness.tables import print_run_summary

    print_run_summary(run_dir, full=True)


def _terminate_as_interrupt(signum, frame) -> None:
    raise KeyboardInterrupt  # SIGTERM ends a run like Ctrl-C: records kept, servers stopped


def main() -> None:
    signal.signal(signal.SIGTERM, _terminate_as_interrupt)
    try:
        app()
    except SparkbenchError as exc:
        print(f"sparkbench: {exc}", file=sys.stderr)
        sys.exit(exc.exit_code)


if __name__ == "__main__":
    main()
