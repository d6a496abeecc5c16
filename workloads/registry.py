"""Workloads by name: each one's typed config, its builder and, for a scored workload, its scorer.

Every entry point builds workloads through here, and each registered one is a `sparkbench run NAME`
command: options are validated by the workload's config (one line per problem), left-out options
take the default of the target's scale (`WorkloadConfig.at_scale`), and the result is a `Plan` the
runner builds once it knows the server.
A scored workload names its scorer, so nothing downstream asks for a workload by name.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pydantic import Field, model_validator

from harness.config import StrictModel, validated
from harness.errors import SparkbenchError
from workloads import Plan, Scorer, Workload, WorkloadConfig
from workloads.dataset import DatasetConfig, make_dataset
from workloads.gsm8k import GSM8KConfig
from workloads.gsm8k_scoring import GSM8K_SCORER
from workloads.shared_prefix import SharedPrefixConfig, make_shared_prefix
from workloads.specbench import SpecBenchConfig, make_specbench
from workloads.synthetic import SyntheticConfig

Factory = Callable[[dict[str, Any]], Workload]


@dataclass(frozen=True)
class WorkloadEntry:
    config: type[WorkloadConfig]
    factory: Callable[[Any, Path | None], Factory]  # (resolved config, local model folder) -> factory
    description: str  # the help of its `sparkbench run NAME` command
    scorer: Scorer | None = None  # how a scored workload's answers are judged


def _synthetic(config: SyntheticConfig, model_dir: Path | None) -> Factory:
    from workloads.synthetic import make_synthetic

    options = config.model_dump()
    options["tokenizer"] = config.tokenizer or model_dir
    return make_synthetic(**options)


def _gsm8k(config: GSM8KConfig, model_dir: Path | None) -> Factory:
    from workloads.gsm8k import GSM8KWorkload

    workload = GSM8KWorkload(**config.model_dump())
    return lambda facts: workload


WORKLOADS = {
    "synthetic": WorkloadEntry(SyntheticConfig, _synthetic,
                               "Synthetic decode: random-token prompts, fixed output length, greedy, ignore_eos "
                               "(or lengths drawn per request from a distribution)."),
    "gsm8k": WorkloadEntry(GSM8KConfig, _gsm8k, "GSM8K: five-shot chain-of-thought, published sampling; accuracy "
                           "and speed from the same requests.", scorer=GSM8K_SCORER),
    "specbench": WorkloadEntry(SpecBenchConfig, make_specbench, "Spec-Bench: six tasks (MT-bench two-turn "
                               "conversations, translation, summarization, QA, math reasoning, RAG), greedy."),
    "dataset": WorkloadEntry(DatasetConfig, make_dataset, "Your own prompts: a JSONL, JSON, CSV or Parquet file, a "
                             "datasets folder or a cached dataset (text, chat messages or ShareGPT; multi-turn)."),
    "shared-prefix": WorkloadEntry(SharedPrefixConfig, make_shared_prefix, "Shared prefixes: groups of prompts "
                                   "opening with the same tokens (SGLang's generated-shared-prefix), prefix cache "
                                   "on, hit figures from the server's counts."),
}


def entry(name: str) -> WorkloadEntry:
    """The registered workload called `name`; unknown names are a one-line error."""
    if name not in WORKLOADS:
        raise SparkbenchError(f"unknown workload {name!r}; choose one of {', '.join(WORKLOADS)}")
    return WORKLOADS[name]


def headline_metrics(name: str) -> tuple[str, ...]:
    """The summary metrics workload `name` exists for (its config's `headline_metrics`); none for a
    workload not known here (an old run's)."""
    known = WORKLOADS.get(name)
    return known.config.headline_metrics if known else ()


def scorer_for(name: str) -> Scorer | None:
    """The scorer of workload `name`; None when it is not scored (or not known here: an old run's)."""
    known = WORKLOADS.get(name)
    return known.scorer if known else None


def config_of(name: str, options: dict[str, Any]) -> WorkloadConfig:
    """The workload's config validated from `options` (None values: not given)."""
    given = {key: value for key, value in options.items() if value is not None}
    return validated(entry(name).config, given, f"{name} options")


def plan(name: str, config: WorkloadConfig, reduced: bool, model_dir: Path | None) -> Plan:
    """The plan of workload `name`: its config at the target's scale, and its factory."""
    resolved = config.at_scale(reduced)
    return Plan(resolved, entry(name).factory(resolved, model_dir))


def build(name: str, options: dict[str, Any], reduced: bool, model_dir: Path | None) -> Plan:
    """`plan` of the options validated by the workload's config."""
    return plan(name, config_of(name, options), reduced, model_dir)


class NamedWorkload(StrictModel):
    """A workload as a config file names it: its registered name and options (validated by its
    config when the file is read, so a typo fails before any server starts)."""

    name: str
    options: dict[str, Any] = Field(default_factory=dict)

    @model_validator(mode="after")
    def _options_fit_the_workload(self) -> NamedWorkload:
        config_of(self.name, self.options)  # raises a SparkbenchError naming each bad option
        return self
