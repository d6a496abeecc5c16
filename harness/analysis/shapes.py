"""Which runs may be compared: the same workload with the same shape.

A run's shape is its workload spec without the keys that only choose or salt the prompts
(`DRAW_KEYS`): input and output lengths, sampling, templates, shots and data stay in it, and so do
the engine's own request fields (`--extra-body`), which change what the server is asked. Runs of
different shapes are never compared with each other; `compare_by_shape` compares each group of
same-shape runs against its own baseline and says in one line why the other runs were left apart.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass

import pandas as pd

from harness.analysis.compare import PER_RUN_KEYS, format_comparison, pick_baseline
from harness.analysis.repeats import compare_repeated
from harness.analysis.run import Run, tell_apart
from harness.records.entries import SamplingEntry, WorkloadSpec

# Spec keys that choose which prompts are sent (or salt them) without changing what is measured;
# the sampling's per-request seed is one of them. The tokenizer's vocabulary belongs to the model.
DRAW_KEYS = (PER_RUN_KEYS - {"sampling"}) | {"seed", "shot_ids", "vocabulary_size", "special_ids_excluded"}


def shape_key(run: Run) -> str:
    """The run's workload spec without DRAW_KEYS, as canonical JSON: equal keys, same shape."""
    spec = {k: v for k, v in run.record.workload.as_recorded().items() if k not in DRAW_KEYS}
    if isinstance(spec.get("sampling"), dict):
        spec["sampling"] = {k: v for k, v in spec["sampling"].items() if k != "seed"}
    if run.record.options.extra_body:
        spec["extra_body"] = run.record.options.extra_body
    return json.dumps(spec, sort_keys=True, default=str)


def shape_text(run: Run) -> str:
    """The shape for people: workload, lengths and sampling, e.g. `synthetic: 8192 in / 512 out, greedy`."""
    spec = run.record.workload
    sampling = spec.sampling or SamplingEntry()
    lengths = _lengths_text(spec, sampling)
    temperature = sampling.temperature
    how = ("sampling not recorded" if temperature is None else "greedy" if temperature == 0 else
           f"T={temperature} top_p={sampling.top_p} top_k={sampling.top_k}")
    return f"{run.workload}: {' / '.join(lengths)}, {how}"


def _lengths_text(spec: WorkloadSpec, sampling: SamplingEntry) -> list[str]:
    """The input and output lengths for people: fixed ones, a mix's distributions, a shared prefix,
    a replayed trace's lengths, a dataset's per-row lengths."""
    recorded, extra = spec.model_fields_set, spec.model_extra or {}
    lengths = [f"{extra.get('num_groups')} groups sharing a {extra['prefix_tokens']}-token prefix"] \
        if extra.get("prefix_tokens") else []
    if extra.get("input_len_dist"):
        lengths.append(f"{extra['input_len_dist']} in")
    elif spec.input_tokens is not None:
        lengths.append(f"{spec.input_tokens} in")
    output = sampling.max_new_tokens if "max_new_tokens" in sampling.model_fields_set else spec.output_tokens
    exact = sampling.ignore_eos or "output_tokens" in recorded  # every answer runs to its limit
    if extra.get("trace_sha256"):
        lengths.append("lengths of the --schedule trace")
    elif extra.get("output_len_dist"):
        lengths.append(f"{extra['output_len_dist']} out")
    elif output is not None:
        lengths.append(f"{output} out" + ("" if exact else " max"))
    else:  # a workload of many lengths says where they come from (a dataset: per row)
        per_row = extra.get("output_lengths")
        lengths.append(f"output lengths {per_row}" if per_row else "output length not recorded")
    return lengths


def why_apart(base: Run, run: Run) -> str:
    """One line: the first spec keys in which `run`'s shape differs from `base`'s."""
    if run.workload != base.workload:
        return f"different workload ({run.workload}, baseline {base.workload})"
    mine, theirs = json.loads(shape_key(run)), json.loads(shape_key(base))
    keys = sorted(k for k in mine.keys() | theirs.keys() if mine.get(k) != theirs.get(k))
    if keys == ["sampling"]:
        keys = sorted(f"sampling.{k}" for k in mine["sampling"].keys() | theirs["sampling"].keys()
                      if mine["sampling"].get(k) != theirs["sampling"].get(k))
    return "different shape (" + ", ".join(keys[:4]) + ("..." if len(keys) > 4 else "") + ")"


@dataclass
class ShapeGroup:
    """Runs of one shape, their comparison against the group's baseline, and why the group stands
    apart from the report's baseline (empty when it holds it)."""

    runs: list[Run]
    baseline: Run
    comparison: pd.DataFrame
    apart: str


def group_by_shape(runs: Sequence[Run]) -> list[list[Run]]:
    """Runs grouped by shape_key, groups in order of their first run, runs in the given order."""
    groups: dict[str, list[Run]] = {}
    for run in runs:
        groups.setdefault(shape_key(run), []).append(run)
    return list(groups.values())


def first_measured(runs: Sequence[Run]) -> Run:
    """The first run with an ok request (a run that measured nothing is no baseline), else the first."""
    return next((run for run in runs if not run.measured.empty), runs[0])


def compare_by_shape(runs: Sequence[Run], baseline: str | None = None) -> list[ShapeGroup]:
    """compare_loaded within each shape group (judged by repetitions where both sides were repeated:
    `harness.analysis.repeats`), runs that share a label numbered (`tell_apart`).
    The run_id `baseline` (default: the first run with an ok request) leads its group; every other
    group is compared against its own first run with an ok request."""
    tell_apart(runs)
    lead = pick_baseline(runs, baseline) if baseline else first_measured(runs)
    out = []
    for members in group_by_shape(runs):
        base = lead if lead in members else first_measured(members)
        apart = "" if base is lead else f"not compared with {lead.caption}: {why_apart(lead, base)}"
        out.append(ShapeGroup(members, base, compare_repeated(members, base.run_id), apart))
    return out


def format_groups(groups: Sequence[ShapeGroup]) -> str:
    """Each group's comparison as text for a terminal, under its shape (and why it stands apart)."""
    blocks = [f"== {shape_text(g.baseline)}" + (f"\n{g.apart}" if g.apart else "") + "\n\n"
              + format_comparison(g.comparison) for g in groups]
    return "\n\n".join(blocks)
