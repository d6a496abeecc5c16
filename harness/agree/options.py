"""The options of an agreement run (`AgreeOptions`), apart from the machinery that runs it, so that
the command line can offer them without importing the scoring, tables and statistics."""

from __future__ import annotations

from pydantic import Field, field_validator

from harness.agree.sequences import SOURCES
from harness.config import PathText, StrictModel
from harness.errors import SparkbenchError
from workloads.gsm8k import DEFAULT_SHOT_SEED, GSM8KConfig


class AgreeOptions(StrictModel):
    """What to score and how: GSM8K questions [offset, offset + limit), continuation source, k."""

    source: str = Field("answers", description="Continuation scored after each GSM8K prompt: answers (the "
                        "reference answers) or greedy (the reference server's own).")
    limit: int | None = Field(None, ge=1, description="Questions to score [all 1,319].")
    offset: int = Field(0, ge=0, description="First test question.")
    shot_seed: int = Field(DEFAULT_SHOT_SEED, description=GSM8KConfig.model_fields["shot_seed"].description)
    max_new_tokens: int = Field(256, ge=1, description="Greedy continuation length (source greedy).")
    top_k: int = Field(10, ge=2, le=20, description="Top-k returned at every position.")
    tokenizer: PathText | None = Field(None, description="Local tokenizer folder of the served model "
                                       "(default: the reference's model folder).")
    request_timeout_s: float = Field(600.0, ge=1.0, description="Seconds a scoring request may take.")

    @field_validator("source")
    @classmethod
    def _known_source(cls, source: str) -> str:
        if source not in SOURCES:  # a SparkbenchError passes through validation as one line
            raise SparkbenchError(f"unknown continuation source {source!r}; choose one of {', '.join(SOURCES)}")
        return source
