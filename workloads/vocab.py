"""The model's vocabulary as the synthetic workload needs it: ids it may use as prompt tokens."""

from __future__ import annotations

import json
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path
from typing import Any

from harness.errors import SparkbenchError


@dataclass(frozen=True)
class Vocabulary:
    size: int
    special_ids: frozenset[int]

    def ordinary_ids(self) -> list[int]:
        """Every id that is not a special or added token, ascending."""
        return [i for i in range(self.size) if i not in self.special_ids]

    @cached_property
    def ordinary_array(self) -> Any:
        """`ordinary_ids` as a numpy array, made once: prompts draw from it thousands of times, and
        a vocabulary of 150K ids takes milliseconds to list and convert each time."""
        import numpy as np  # imported when prompts are drawn: the help must not load numpy

        return np.asarray(self.ordinary_ids())


def load_vocabulary(model_dir: str | Path) -> Vocabulary:
    """Read a Hugging Face tokenizer folder: its `tokenizer.json` size and its added/special tokens."""
    path = Path(model_dir) / "tokenizer.json"
    if not path.is_file():
        raise SparkbenchError(f"no tokenizer.json in {model_dir}; pass --tokenizer DIR (a local copy of the model's tokenizer)")
    from tokenizers import Tokenizer  # imported here: only the synthetic workload needs it

    try:
        tokenizer = Tokenizer.from_file(str(path))
    except Exception as exc:  # the tokenizers library raises its own exception type for a bad file
        raise SparkbenchError(f"{path} is not a valid tokenizer file ({str(exc).splitlines()[0][:120]})") from exc
    added = json.loads(path.read_text(encoding="utf-8")).get("added_tokens", [])
    special = frozenset(token["id"] for token in added)
    return Vocabulary(size=tokenizer.get_vocab_size(with_added_tokens=True), special_ids=special)
