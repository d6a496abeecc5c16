"""Run llama.cpp's `convert_hf_to_gguf.py` with the BPE pre-tokenizer named instead of detected.

The converter recognises a BPE pre-tokenizer by hashing how the tokenizer splits a fixed text, and
refuses tokenizers it has not seen, such as the test bed's own. This wrapper replaces that lookup
with the name given (a pre-tokenizer llama.cpp implements) and then runs the converter unchanged.
Run it with a Python that has torch and transformers:

    python convert_gguf.py LLAMA_CPP_SOURCE PRE_TOKENIZER MODEL_DIR [converter options...]
"""

from __future__ import annotations

import runpy
import sys
from pathlib import Path


def main(source: str, pre_tokenizer: str, *converter_args: str) -> None:
    sys.path[:0] = [source, str(Path(source) / "gguf-py")]
    from conversion.base import TextModel  # the converter's own package, from `source`

    TextModel.get_vocab_base_pre = lambda self, tokenizer: pre_tokenizer
    script = str(Path(source) / "convert_hf_to_gguf.py")
    sys.argv = [script, *converter_args]
    runpy.run_path(script, run_name="__main__")


if __name__ == "__main__":
    if len(sys.argv) < 4:
        raise SystemExit(__doc__)
    main(*sys.argv[1:])
