"""One recorded run, read once: `Run.load(path)`.

The manifest is read when the run is loaded (a folder that is no run fails there, in one line);
everything else is computed on first use and kept: the request records, the scores of a scored
workload (its registered scorer), the derived per-request table, and the long summary. Compare,
plots, report, the nightly job and the notebook all take `Run` objects, so no stage reads or
derives a run twice. `write_tables` leaves `summary.csv` (and a scored workload's
`questions.parquet`) beside the records; the runner calls it when a run ends, whatever its status.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from functools import cached_property
from pathlib import Path
from typing import Any

import pandas as pd

from harness.analysis.acceptance import RunHistogram, acceptance_rows, run_histogram
from harness.analysis.imported import imported_summary, imported_table
from harness.analysis.roofline import RooflineInputs, roofline_values, run_roofline
from harness.analysis.telemetry import server_cache_hit_rate
from harness.facts import EngineFacts
from harness.metrics import SUMMARY_COLUMNS, derive_requests
from harness.metrics.catalogue import CATALOGUE
from harness.metrics.energy import run_energy
from harness.metrics.load import in_measured_window
from harness.metrics.roofline import ROOFLINE_UNITS, Roofline
from harness.metrics.schema import STAT_UNITS
from harness.metrics.slo import slo_met, slo_values
from harness.metrics.summary import ok_requests, summarize_derived
from harness.metrics.values import floats
from harness.power.sampler import load_power_samples
from harness.records.atomic import write_atomically
from harness.records.entries import PowerEntry, ServerCounters
from harness.records.manifest import RunRecord
from harness.records.requests import load_requests
from harness.records.rundir import MANIFEST_NAME, load_manifest
from harness.records.timeseries import DEVICE, DEVICE_COLUMNS, SERVER_COLUMNS, SERVER_METRICS, load_series
from harness.run.label import load_label, run_label
from harness.slo_targets import parse_slo
from workloads import Scorer
from workloads.registry import scorer_for

SUMMARY_NAME = "summary.csv"
QUESTIONS_NAME = "questions.parquet"  # a scored workload's table: prompt, output, gold, predictions, flags
ROW_COLUMNS = ["metric", "stat", "value", "unit"]
LEGACY_REDUCED_PREFIX = "REDUCED SCALE"  # how SCALE_LABEL begins


class Run:
    """A run directory: manifest, records, scores, derived table and summary, each read once."""

    def __init__(self, path: Path | str, manifest: dict[str, Any], inputs: RooflineInputs = RooflineInputs()) -> None:
        self.path = Path(path)
        self.manifest = manifest
        self.inputs = inputs  # what the decode roofline needs where the run does not say it
        self.ordinal = ""  # ` #2` when shown beside other runs of the same label (`tell_apart`)

    @classmethod
    def load(cls, path: Path | str, inputs: RooflineInputs = RooflineInputs()) -> Run:
        """The run at `path`; a manifest whose entries have the wrong types is refused here, in one
        line, before any reader takes an entry for what it should be."""
        manifest = load_manifest(Path(path))
        RunRecord.of(manifest, str(Path(path) / MANIFEST_NAME))
        return cls(path, manifest, inputs)

    @property
    def record(self) -> RunRecord:
        """The manifest as a typed record (`harness.records.manifest`), read as it is now: a writer
        that shares the manifest (`RunDir`) may still be adding to it. Every reader asks this."""
        return RunRecord.of(self.manifest, str(self.path / MANIFEST_NAME))

    @property
    def run_id(self) -> str:
        return self.record.run_id

    @cached_property
    def facts(self) -> EngineFacts:
        """The server's normalised facts (derived from the raw snapshot for a run recorded before them)."""
        return self.record.facts

    @property
    def workload(self) -> str:
        return self.record.workload.name

    @property
    def reduced_scale(self) -> bool:
        """Whether the run served a test-bed model (tiny random or SmolLM2-135M). Manifests written before the flag
        existed say so only in their scale label."""
        record = self.record
        if record.reduced_scale is not None:
            return record.reduced_scale
        return (record.scale or "").startswith(LEGACY_REDUCED_PREFIX)

    @property
    def scale_note(self) -> str:
        """A short scale label: the reduced CPU test bed, else the recorded scale."""
        return "REDUCED SCALE CPU test bed" if self.reduced_scale else self.record.scale or "scale not recorded"

    @property
    def label(self) -> str:
        """The run's label (`--label`), else the one derived from profile and options
        (harness.run.label), also for runs recorded before labels existed."""
        return run_label(self.record)

    @property
    def name(self) -> str:
        """The label, with its ordinal among runs shown together that share it (`tell_apart`)."""
        return self.label + self.ordinal

    @property
    def caption(self) -> str:
        """How a run is named wherever it appears: name, load (concurrency, or an open loop's rate and
        cap; unless the label states it), REDUCED SCALE on the test bed, and status, e.g.
        `cpu-testbed c=1 · REDUCED SCALE · complete`."""
        load = load_label(self.record) or "c=n/a"
        parts = [self.name, *([] if set(load.split()) <= set(self.label.split()) else [load]),
                 *(["REDUCED SCALE"] if self.reduced_scale else []), self.status]
        return " · ".join(parts)

    @property
    def concurrency(self) -> int | None:
        return self.record.options.concurrency_count

    @property
    def status(self) -> str:
        """How the run ended (`complete`, `interrupted`, `failed`), or `running` / `stale`."""
        return self.record.seen_status

    @property
    def engine_and_api(self) -> tuple[str | None, str | None]:
        return self.record.engine_and_api

    @cached_property
    def requests(self) -> pd.DataFrame:
        """The per-request records as stored (an imported run: the tool's rows, `imported_table`)."""
        return imported_table(self.path) if self.record.imported else load_requests(self.path)

    @cached_property
    def server_metrics(self) -> pd.DataFrame:
        """The server's `/metrics` series sampled during the run (empty when none were)."""
        return load_series(self.path, SERVER_METRICS, SERVER_COLUMNS)

    @cached_property
    def device_samples(self) -> pd.DataFrame:
        """The GPUs' NVML readings sampled during the run (empty when none were)."""
        return load_series(self.path, DEVICE, DEVICE_COLUMNS)

    @cached_property
    def scorer(self) -> Scorer | None:
        return scorer_for(self.workload)

    @cached_property
    def scores(self) -> pd.DataFrame | None:
        """One row per question of a scored workload (its scorer's table); None otherwise."""
        if self.scorer is None or self.requests.empty:
            return None
        return self.scorer.score(self.requests)

    @cached_property
    def derived(self) -> pd.DataFrame:
        """The records with every derived column, and a boolean `correct` where the run is scored; an
        imported run's rows hold only the tool's own figures (harness.analysis.imported)."""
        if self.record.imported:
            return self.requests
        requests = self.requests
        if self.scores is not None:
            flags = self.scores[["prompt_id", self.scorer.correct]].rename(columns={self.scorer.correct: "correct"})
            requests = requests.merge(flags, on="prompt_id", how="left")
        derived = derive_requests(requests)
        return derived.assign(slo_met=slo_met(derived, self.slo_targets)) if self.slo_targets else derived

    @property
    def slo_targets(self) -> dict[str, float]:
        """The run's SLO targets, {figure: limit in ms} (`--slo`); empty when none were given."""
        slo = self.record.options.slo
        return parse_slo(slo) if slo else {}

    @cached_property
    def judged(self) -> pd.DataFrame:
        """The derived rows of every request in the measured window (an open-loop run's warm-up and
        cool-down left out), failed ones included: what SLO attainment counts."""
        return in_measured_window(self.derived)

    @cached_property
    def measured(self) -> pd.DataFrame:
        """The judged rows of the requests that succeeded: what every timing comparison uses."""
        return ok_requests(self.judged)

    @cached_property
    def speed(self) -> pd.DataFrame:
        """The summary rows computed from the derived table (speed, and correctness where scored)."""
        return summarize_derived(self.derived, self.run_id, self.workload)

    @cached_property
    def histogram(self) -> RunHistogram:
        """Verify steps by accepted drafts (harness.analysis.acceptance), and where they came from."""
        return run_histogram(self.measured, self.record.server_counters)

    @cached_property
    def roofline(self) -> tuple[Roofline | None, str]:
        """The decode roofline (harness.analysis.roofline) at the run's mean decode context,
        `mean(prompt_tokens + completion_tokens / 2)` tokens, or None and why not."""
        values = self.speed[self.speed["stat"] == "value"].set_index("metric")["value"]
        return run_roofline(self.record, values.to_dict(), mean_decode_context(self.requests), self.inputs)

    @cached_property
    def summary(self) -> pd.DataFrame:
        """The long summary (SUMMARY_COLUMNS): `speed`, then the server's counters, acceptance per
        draft position and under each definition, energy, SLO attainment and goodput, the scorer's
        accuracy rows and the decode roofline."""
        record = self.record
        if record.imported:
            return imported_summary(self.path, record.imported, self.run_id, self.workload)
        parts = [counter_rows(record.server_counters), cache_counter_rows(self), acceptance_rows(self.histogram, self.measured),
                 energy_rows(self.path, record.power, self.requests), slo_rows(self.judged, self.slo_targets)]
        if self.scores is not None:
            parts.append(self.scorer.summary(self.scores))
        parts.append(roofline_rows(self.roofline[0]))
        labelled = [part.assign(run_id=self.run_id, workload=self.workload)[list(SUMMARY_COLUMNS)] for part in parts]
        return pd.concat([self.speed, *labelled], ignore_index=True)

    @cached_property
    def questions(self) -> pd.DataFrame | None:
        """A scored workload's per-question table with each prompt and output; None otherwise."""
        if self.scores is None:
            return None
        return self.scores.merge(self.requests[["prompt_id", "prompt_text", "output_text"]], on="prompt_id")

    def write_tables(self) -> list[Path]:
        """Write summary.csv (and questions.parquet for a scored run) into the run directory."""
        written = [write_atomically(self.path / SUMMARY_NAME, lambda partial: self.summary.to_csv(partial, index=False))]
        if self.questions is not None:
            written.append(write_atomically(self.path / QUESTIONS_NAME,
                                            lambda partial: self.questions.to_parquet(partial, index=False)))
        return written


def mean_decode_context(requests: pd.DataFrame) -> float:
    """Tokens a decode step attends to, on average over the run: `mean(prompt_tokens + completion_tokens / 2)`."""
    return float((floats(requests["prompt_tokens"]) + floats(requests["completion_tokens"]) / 2).mean())


def tell_apart(runs: Sequence[Run]) -> list[Run]:
    """Number the runs that share a label (` #1`, ` #2`, in the given order), so that every run
    shown together has a name of its own; returns the runs."""
    counts, seen = Counter(run.label for run in runs), Counter()
    for run in runs:
        seen[run.label] += 1
        run.ordinal = f" #{seen[run.label]}" if counts[run.label] > 1 else ""
    return list(runs)


def counter_rows(counters: ServerCounters) -> pd.DataFrame:
    """Run-level accept length from the server's own counters (delta over the measured requests),
    set beside the per-request figures as a cross-check; empty when the server keeps none."""
    value = counters.accept_length
    metric = CATALOGUE["accept_length_server_counters"]
    rows = [] if value is None else [(metric.name, "value", value, metric.unit)]
    return pd.DataFrame(rows, columns=ROW_COLUMNS)


def cache_counter_rows(run: Run) -> pd.DataFrame:
    """The server's prefix-cache hit rate from its `/metrics` counters over the measured requests
    (`harness.analysis.telemetry.server_cache_hit_rate`): NaN, "not measured", where not exported."""
    metric = CATALOGUE["prefix_cache_hit_rate_server"]
    return pd.DataFrame([(metric.name, "value", server_cache_hit_rate(run), metric.unit)], columns=ROW_COLUMNS)


def energy_rows(run_dir: Path, power: PowerEntry | None, requests: pd.DataFrame) -> pd.DataFrame:
    """Energy per output token and power (harness.metrics.energy) from the run's power samples;
    every figure NaN ("not measured") when no sensor answered."""
    sensors = [sensor.as_recorded() for sensor in power.sensors] if power else []
    values = run_energy(requests, load_power_samples(run_dir), sensors)
    return pd.DataFrame([(metric, "value", value, CATALOGUE[metric].unit) for metric, value in values.items()],
                        columns=ROW_COLUMNS)


def slo_rows(judged: pd.DataFrame, targets: dict[str, float]) -> pd.DataFrame:
    """The SLO metrics (harness.metrics.slo) of the judged requests; none when the run had no SLO."""
    values = slo_values(judged, targets) if targets else {}
    return pd.DataFrame([(metric, stat, value, STAT_UNITS.get(stat, CATALOGUE[metric].unit))
                         for metric, stats in values.items() for stat, value in stats.items()], columns=ROW_COLUMNS)


def roofline_rows(roofline: Roofline | None) -> pd.DataFrame:
    """ROOFLINE_UNITS rows; NaN when the run has no roofline."""
    return pd.DataFrame([(metric, "value", value, ROOFLINE_UNITS[metric])
                         for metric, value in roofline_values(roofline).items()], columns=ROW_COLUMNS)
