"""The learned drafter in the forms the test bed's engines serve, built once into the cache.

- `ensure_hf()`: the EAGLE-3 checkpoint folder (SGLang's and vLLM's `--speculative-draft-model-path`),
  assembled from the pinned weights and the real model's converted checkpoint;
- `ensure_gguf_folder()`: the real model's GGUF beside `eagle3.gguf` (the pinned llama.cpp
  converter's output) and the tokenizer files, the folder a llama.cpp profile serves as
  `{model_dir}` (`--spec-type draft-eagle3 --spec-draft-model {model_dir}/eagle3.gguf`).
Both are keyed by the weights' pin and the code that assembles them; a folder is used only once its
`.complete` marker exists. Torch is needed, so the assembly runs under the SGLang environment's Python.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

from harness.testbed import llamacpp, real_model
from harness.testbed.drafter import artifact
from harness.testbed.envs import MARKER, _digest, build_once, cache_root, env_python, run_script

MODEL_NAME = "smollm2-eagle3"  # how a profile names it (`launch.model`, `launch.draft_model`)
GGUF_FILE = "eagle3.gguf"
PRE_TOKENIZER = "smollm"  # the real model's BPE pre-tokenizer, as llama.cpp names it


def _key() -> str:
    return f"{artifact.pinned_sha256()[:12]}-{_digest(Path(artifact.__file__))}"


def hf_dir() -> Path:
    return cache_root() / "models" / f"{MODEL_NAME}-{_key()}"


def gguf_folder() -> Path:
    return cache_root() / "models" / f"{MODEL_NAME}-gguf-{_key()}"


def ensure_hf() -> Path:
    folder = hf_dir()

    def build() -> None:
        target = real_model.ensure_real_hf()
        run_script(env_python("sglang"), artifact.__file__, target, folder)
        shutil.copy2(target / "LICENSE", folder / "LICENSE")
    return build_once(folder, build)


def ensure_gguf_folder() -> Path:
    folder = gguf_folder()

    def build() -> None:
        llamacpp.require_server()
        draft, target, served = ensure_hf(), real_model.ensure_real_hf(), real_model.ensure_real_gguf()
        folder.mkdir(parents=True)
        llamacpp.convert_to_gguf(draft, folder / GGUF_FILE, "bf16", pre_tokenizer=PRE_TOKENIZER,
                                 extra=("--target-model-dir", target))
        for path in served.iterdir():  # the model as shipped, its license and tokenizer files
            if path.is_file() and path.name != MARKER:
                os.link(path, folder / path.name)
    return build_once(folder, build)


if __name__ == "__main__":
    print(ensure_hf())
    print(ensure_gguf_folder())
