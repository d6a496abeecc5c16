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
import subprocess
from pathlib import Path

from harness.testbed import llamacpp, real_model
from harness.testbed.drafter import artifact
from harness.testbed.envs import MARKER, _digest, _sole_builder, cache_root, env_python

MODEL_NAME = "smollm2-eagle3"  # how a profile names it (`launch.model`, `launch.draft_model`)
GGUF_FILE = "eagle3.gguf"
PRE_TOKENIZER = "smollm"  # the real model's BPE pre-tokenizer, as llama.cpp names it


def _key() -> str:
    return f"{artifact.pinned_sha256()[:12]}-{_digest(Path(artifact.__file__))}"


def hf_dir() -> Path:
    return cache_root() / "models" / f"{MODEL_NAME}-{_key()}"


def gguf_folder() -> Path:
    return cache_root() / "models" / f"{MODEL_NAME}-gguf-{_key()}"


def _run(*args: str) -> None:
    subprocess.run([str(env_python("sglang")), *args], check=True,
                   env={**os.environ, "TOKENIZERS_PARALLELISM": "false"})


def ensure_hf() -> Path:
    folder = hf_dir()
    with _sole_builder(folder) as needed:
        if needed:
            target = real_model.ensure_real_hf()
            shutil.rmtree(folder, ignore_errors=True)
            _run(artifact.__file__, str(target), str(folder))
            shutil.copy2(target / "LICENSE", folder / "LICENSE")
            (folder / MARKER).write_text("ok\n")
    return folder


def ensure_gguf_folder() -> Path:
    folder = gguf_folder()
    with _sole_builder(folder) as needed:
        if needed:
            llamacpp.require_server()
            draft, target, served = ensure_hf(), real_model.ensure_real_hf(), real_model.ensure_real_gguf()
            shutil.rmtree(folder, ignore_errors=True)
            folder.mkdir(parents=True)
            partial = folder / f"{GGUF_FILE}.partial"
            _run(str(llamacpp.CONVERTER), str(llamacpp.source_dir()), PRE_TOKENIZER, str(draft),
                 "--target-model-dir", str(target), "--outfile", str(partial), "--outtype", "bf16")
            partial.rename(folder / GGUF_FILE)
            for path in served.iterdir():  # the model as shipped, its license and tokenizer files
                if path.is_file() and path.name != MARKER:
                    os.link(path, folder / path.name)
            (folder / MARKER).write_text("ok\n")
    return folder


if __name__ == "__main__":
    print(ensure_hf())
    print(ensure_gguf_folder())
