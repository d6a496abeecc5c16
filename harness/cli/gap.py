"""`sparkbench gap`: the synthetic-vs-GSM8K gap taken apart by cause (content, sampling, length)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from harness.cli.app import app

# Profiles of the real test-bed model, per engine: the plain one, and one per drafter (n-gram lookup,
# the project's learned EAGLE-3 drafter where the engine serves it).
ENGINE_PROFILES = {"llamacpp": ("llamacpp-cpu-real", {"ngram": "llamacpp-cpu-real-ngram",
                                                      "eagle3": "llamacpp-cpu-real-eagle3"}),
                   "sglang": ("cpu-real", {"ngram": "cpu-real-ngram", "eagle3": "cpu-real-eagle3"}),
                   "vllm": ("vllm-cpu-real", {"ngram": "vllm-cpu-real-ngram"})}


@app.command("gap")
def gap(
    engine: Annotated[str, typer.Option(help="Engine whose real-model profiles are launched when no --plain/--spec: "
                                             f"{', '.join(ENGINE_PROFILES)}.")] = "llamacpp",
    drafter: Annotated[str, typer.Option(help="The speculative profile's drafter when no --plain/--spec: ngram, or "
                                              "eagle3 (the learned drafter; llama.cpp and SGLang).")] = "ngram",
    plain: Annotated[str | None, typer.Option(help="Base URL of a running plain server (with --spec).")] = None,
    spec: Annotated[str | None, typer.Option(help="Base URL of the same engine and model speculating.")] = None,
    plain_profile: Annotated[str | None, typer.Option(help="Profile the --plain server must match (its guard runs "
                                                           "before each of its runs); default: no guard.")] = None,
    spec_profile: Annotated[str | None, typer.Option(help="Profile the --spec server must match (guard and "
                                                          "acceptance canary before each run); default: no guard.")] = None,
    contents: Annotated[str, typer.Option(help="Comma list of contents: synthetic, synthetic-matched "
                                               "(synthetic prompts as long as GSM8K's, one by one), gsm8k, "
                                               "specbench:TASK (translation, summarization, qa, math_reasoning, "
                                               "rag), or all.")] = "all",
    prompts: Annotated[int, typer.Option(min=1, help="Prompts per content (the same ones in its four cells); "
                                                         "intervals print from 24 (docs/gap.md), fewer give points "
                                                         "only.")] = 6,
    fixed_tokens: Annotated[int, typer.Option(min=2, help="Output tokens of a fixed-length cell (ignore_eos).")] = 128,
    natural_cap: Annotated[int, typer.Option(min=2, help="Token cap of a natural-length cell.")] = 512,
    synthetic_input_tokens: Annotated[int, typer.Option(min=2, help="Prompt tokens of the synthetic content.")] = 512,
    seed: Annotated[int, typer.Option(help="Seed of the synthetic prompts and of the sampled requests.")] = 0,
    tokenizer: Annotated[Path | None, typer.Option(help="Tokenizer folder of the served model, for --plain/--spec "
                                                        "servers that do not name theirs (llama.cpp); launched "
                                                        "servers use their model's.")] = None,
    results: Annotated[Path, typer.Option(help="Folder that receives gap-<id>/.")] = Path("results/gap"),
    analyse: Annotated[Path | None, typer.Option(help="Write the tables and figure of this finished design "
                                                      "folder again, sending nothing.")] = None,
) -> None:
    """Speculation's gain taken apart: every (content x sampling x length) cell on a plain and a speculative
    server of one engine; accept length and decode speed-up per cell with paired intervals, and the change
    from the synthetic corner to the GSM8K corner attributed to each cause (docs/gap.md)."""
    from harness.errors import SparkbenchError
    from harness.gap.analysis import analyse_cells, load_cells
    from harness.gap.design import CONTENTS, Lengths
    from harness.gap.outputs import attribution_markdown, cells_markdown, write_outputs
    from harness.gap.run import GapSettings, load_design

    chosen = CONTENTS if contents == "all" else tuple(c.strip() for c in contents.split(",") if c.strip())
    unknown = [c for c in chosen if c not in CONTENTS]
    if unknown or not chosen:
        raise SparkbenchError(f"--contents: unknown {', '.join(unknown) or 'none given'}; choose from "
                              f"{', '.join(CONTENTS)} or all")
    if (plain is None) != (spec is None):
        raise SparkbenchError("give both --plain and --spec, or neither (then --engine's profiles are launched)")
    if plain is None and (plain_profile or spec_profile):
        raise SparkbenchError("--plain-profile and --spec-profile describe --plain and --spec servers; without them "
                              "--engine's profiles are launched")
    if engine not in ENGINE_PROFILES:
        raise SparkbenchError(f"--engine {engine!r}: choose one of {', '.join(ENGINE_PROFILES)}")
    if natural_cap < fixed_tokens:
        raise SparkbenchError(f"--natural-cap {natural_cap} is below --fixed-tokens {fixed_tokens}")
    plain_default, drafters = ENGINE_PROFILES[engine]
    if drafter not in drafters:
        raise SparkbenchError(f"--drafter {drafter!r}: {engine} serves {', '.join(drafters)}")
    profiles = (plain_profile, spec_profile) if plain else (plain_default, drafters[drafter])
    folder = analyse or _run(plain, spec, profiles, GapSettings(chosen, prompts, Lengths(fixed_tokens, natural_cap),
                                                               synthetic_input_tokens, seed, tokenizer), results)
    design = load_design(folder)
    cells, attribution = analyse_cells(load_cells(folder, design))
    report = write_outputs(folder, cells, attribution, design)
    print(f"{cells_markdown(cells)}\n\n{attribution_markdown(attribution)}\n\ngap: {folder}\nreport: {report}")


def _run(plain: str | None, spec: str | None, profiles: tuple[str | None, str | None], settings,
         results: Path) -> Path:
    """Run the design on the two servers given (checked against `profiles` where named), else on
    `profiles` launched."""
    from contextlib import ExitStack

    from harness.gap.run import held_targets, run_design

    with ExitStack() as stack:
        targets = held_targets(stack, {"plain": plain, "speculative": spec}, dict(zip(("plain", "speculative"), profiles)))
        return run_design(targets, settings, results)
