"""Every cell of the design sent to a plain and a speculative server of one engine.

Each (cell, server) pair is an ordinary run (`harness.session.run_planned`: guard, warm-up, one
record per request, manifest), so `summarize`, `compare` and `report` read it like any other. The
plain and the speculative run of a cell go back to back, cell after cell, so a change in the host's
load over the design meets both arms of a cell alike. `gap.json` in the design's folder lists the
cells and their runs as they finish; a cell whose run failed is recorded and the design goes on.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Callable
from contextlib import ExitStack
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from harness.errors import SparkbenchError
from harness.gap.design import (
    GSM8K,
    SPECBENCH_PREFIX,
    SYNTHETIC,
    SYNTHETIC_MATCHED,
    Cell,
    CellWorkload,
    LengthMatchedWorkload,
    Lengths,
    cells,
)
from harness.records.atomic import write_text_atomically
from harness.records.rundir import new_run_id
from harness.request import RunRequest, TargetSpec
from harness.run.signals import ended_by_signal
from harness.run.target import Target, backend_for
from harness.spec import Prompt
from workloads import Plan
from workloads.registry import build

ROLES = ("plain", "speculative")
MANIFEST = "gap.json"


@dataclass(frozen=True)
class GapSettings:
    contents: tuple[str, ...]
    prompts: int  # per content: the same prompts in each of its four cells
    lengths: Lengths
    synthetic_input_tokens: int
    seed: int = 0
    tokenizer: Path | None = None  # the served model's tokenizer folder, for attached servers that do not name one


def content_plan(content: str, settings: GapSettings, target: Target) -> Plan:
    """The registered workload that supplies a content's prompts, at the design's size."""
    n, cap = settings.prompts, settings.lengths.natural_cap
    model_dir = settings.tokenizer or target.model_dir
    if content == SYNTHETIC:
        options: dict[str, Any] = {"num_prompts": n, "input_tokens": settings.synthetic_input_tokens,
                                   "output_tokens": settings.lengths.fixed, "seed": settings.seed,
                                   "salt": settings.seed}
        return build(SYNTHETIC, options, target.reduced, model_dir)
    if content == SYNTHETIC_MATCHED:
        synthetic, reference = content_plan(SYNTHETIC, settings, target), content_plan(GSM8K, settings, target)
        return Plan(synthetic.config, lambda facts: LengthMatchedWorkload(
            synthetic.make(facts), reference.make(facts), token_counter(model_dir or facts.tokenizer_path)))
    if content == GSM8K:
        return build(GSM8K, {"limit": n, "max_new_tokens": cap}, target.reduced, model_dir)
    if content.startswith(SPECBENCH_PREFIX):
        options = {"categories": [content.removeprefix(SPECBENCH_PREFIX)], "per_task": n, "max_new_tokens": cap}
        return build("specbench", options, target.reduced, model_dir)
    raise SparkbenchError(f"unknown content {content!r}")


def token_counter(folder: Path | str | None) -> Callable[[Prompt], int]:
    """A prompt's length in tokens as the server counts it: its ids, or its text through the served
    model's tokenizer with the tokenizer's own special tokens (a BOS where the model adds one)."""
    if not folder:
        raise SparkbenchError("synthetic-matched needs the served model's tokenizer: give --tokenizer DIR")
    from tokenizers import Tokenizer

    tokenizer = Tokenizer.from_file(str(Path(folder) / "tokenizer.json"))
    return lambda prompt: len(prompt.input_ids) if prompt.input_ids is not None else len(tokenizer.encode(prompt.text).ids)


def cell_plan(cell: Cell, settings: GapSettings, target: Target) -> Plan:
    inner = content_plan(cell.content, settings, target)
    return Plan(inner.config, lambda facts: CellWorkload(inner.make(facts), cell, settings.lengths, settings.seed))


def run_design(targets: dict[str, Target], settings: GapSettings, out: Path,
               progress: Callable[[str], None] = lambda line: print(line, file=sys.stderr, flush=True)) -> Path:
    """Run every cell on both targets ({role: Target}); return the design's folder."""
    from harness.session import run_options, run_planned

    folder = out / new_run_id("gap")
    folder.mkdir(parents=True)
    record: dict[str, Any] = {"settings": _settings_dict(settings), "servers": {r: t.base_url for r, t in targets.items()},
                              "profiles": {r: t.profile.name if t.profile else None for r, t in targets.items()},
                              "cells": []}
    backends = {role: backend_for(target, "auto") for role, target in targets.items()}
    for cell in cells(settings.contents):
        entry: dict[str, Any] = {**cell.to_dict(), "runs": {}, "errors": {}}
        for role in ROLES:
            request = RunRequest(target=TargetSpec(server=targets[role].base_url), results=folder / "runs",
                                 label=f"{cell.name} {role}", options={"show_progress": False})
            try:
                finished = run_planned(targets[role], backends[role], cell_plan(cell, settings, targets[role]),
                                       run_options(request, targets[role].base_url), request)
                entry["runs"][role] = finished.path.name
            except SparkbenchError as exc:
                entry["errors"][role] = str(exc)
            progress(f"gap {cell.name} {role}: {entry['errors'].get(role) or 'done'}")
            if ended_by_signal(entry["errors"].get(role)):
                break
        record["cells"].append(entry)
        _write(folder, record)
        if any(ended_by_signal(error) for error in entry["errors"].values()):
            break  # Ctrl-C or SIGTERM: the cells so far are kept and analysed, no new run starts
    return folder


def _settings_dict(settings: GapSettings) -> dict[str, Any]:
    return {"contents": list(settings.contents), "prompts": settings.prompts, "fixed_tokens": settings.lengths.fixed,
            "natural_cap": settings.lengths.natural_cap, "synthetic_input_tokens": settings.synthetic_input_tokens,
            "seed": settings.seed}


def _write(folder: Path, record: dict[str, Any]) -> None:
    write_text_atomically(folder / MANIFEST, json.dumps(record, indent=2) + "\n")


def load_design(folder: Path) -> dict[str, Any]:
    path = folder / MANIFEST
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise SparkbenchError(f"{folder} is not a gap design folder ({MANIFEST}: {exc})") from None


def held_targets(stack: ExitStack, servers: dict[str, str | None], profiles: dict[str, str | None]) -> dict[str, Target]:
    """The plain and speculative targets, attached by URL or launched from their profiles, held
    open for the whole design by `stack`."""
    from harness.session import open_target

    return {role: stack.enter_context(open_target(TargetSpec(server=servers[role], profile=profiles[role])))
            for role in ROLES}
