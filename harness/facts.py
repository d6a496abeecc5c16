"""What every reader asks of the server a run measured, in one vocabulary: `EngineFacts`.

The engine's adapter writes them (`Engine.facts`, from its raw snapshot and the launch flags) into
the manifest beside that snapshot; the report, the roofline and the workloads read these, never an
engine's raw snapshot. A fact the engine does not export is None, and is shown as NOT_EXPORTED:
never a made-up zero or an empty string that looks like an answer.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from harness.config import StrictModel

NOT_EXPORTED = "not exported"
# The guard's flat vocabulary (SGLang's /server_info names) of the speculative settings.
SPECULATIVE_KEYS = {"algorithm": "speculative_algorithm", "num_steps": "speculative_num_steps",
                    "num_draft_tokens": "speculative_num_draft_tokens", "eagle_topk": "speculative_eagle_topk"}
SPECULATIVE_FACT_KEYS = tuple(SPECULATIVE_KEYS.values())


def _text(value: Any) -> str | None:
    return None if value is None or value == "" else str(value)


def _count(value: Any) -> int | None:
    return int(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else None


class SpeculativeFacts(StrictModel):
    """The server's speculative decoding settings; `algorithm` None: it does not speculate."""

    algorithm: str | None = None
    num_steps: int | None = None  # draft rounds per verification
    num_draft_tokens: int | None = None  # positions one verification checks (drafts + the bonus)
    eagle_topk: int | None = None


class EngineFacts(StrictModel):
    """The normalised facts of a run's server; None: not exported (or not recorded)."""

    engine: str | None = None
    version: str | None = None
    model: str | None = None  # the checkpoint it serves: a folder, a file, or the name it lists
    tokenizer_path: str | None = None
    dtype: str | None = None
    quantization: str | None = None
    kv_cache_dtype: str | None = None
    fp32_lm_head: bool | None = None
    speculative: SpeculativeFacts | None = None  # None: the engine does not say whether it speculates

    @classmethod
    def from_flat(cls, engine: str | None, flat: Mapping[str, Any]) -> EngineFacts:
        """The facts from the guard's flat vocabulary (`Engine.server_facts`, SGLang's names); a
        speculative setting counts as exported when its key is present, even if None (no speculation)."""
        speculative = None
        if any(key in flat for key in SPECULATIVE_KEYS.values()):
            speculative = SpeculativeFacts(algorithm=_text(flat.get(SPECULATIVE_KEYS["algorithm"])),
                                           **{name: _count(flat.get(key)) for name, key in SPECULATIVE_KEYS.items()
                                              if name != "algorithm"})
        head = flat.get("enable_fp32_lm_head")
        return cls(engine=engine, version=_text(flat.get("version")), model=_text(flat.get("model_path")),
                   tokenizer_path=_text(flat.get("tokenizer_path")), dtype=_text(flat.get("dtype")),
                   quantization=_text(flat.get("quantization")), kv_cache_dtype=_text(flat.get("kv_cache_dtype")),
                   fp32_lm_head=head if isinstance(head, bool) else None, speculative=speculative)

    def shown(self, name: str) -> str:
        """A fact as a reader sees it: its value, or NOT_EXPORTED."""
        value = getattr(self, name)
        return NOT_EXPORTED if value is None else str(value)

    def speculation_shown(self) -> str:
        """The speculative settings as a reader sees them: NOT_EXPORTED, `none`, or the algorithm
        with the settings the engine states."""
        spec = self.speculative
        if spec is None:
            return NOT_EXPORTED
        if spec.algorithm is None:
            return "none"
        parts = [f"{name.replace('_', ' ')} {value}" for name, value in spec.model_dump().items()
                 if name != "algorithm" and value is not None]
        return ", ".join([spec.algorithm, *parts])

    def dtypes(self) -> dict[str, Any]:
        """The dtype facts in the guard's vocabulary (what `harness.guard.checks.lm_head_dtype` and the
        roofline's dtype rules read)."""
        return {"dtype": self.dtype, "quantization": self.quantization, "kv_cache_dtype": self.kv_cache_dtype,
                "enable_fp32_lm_head": self.fp32_lm_head}
