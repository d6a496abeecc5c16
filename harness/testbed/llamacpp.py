"""llama.cpp's native `llama-server` for the CPU test bed, built from a pinned source, and GGUF models.

The source is llama.cpp as vendored in the `llama-cpp-python` sdist on PyPI (the package index is the
one source reachable offline here); its sha256 is pinned. The build folder's name carries the pin and
a hash of the cmake flags, so a changed pin or flag builds afresh and a warm machine reuses the old
one. The extracted source stays beside the binary: its converter (`convert_hf_to_gguf.py`, with its
own `gguf-py`) turns the tiny Hugging Face model into GGUF, cached per model and pin.
A folder is used only once its `.complete` marker exists, so an interrupted build is redone.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import sys
import tarfile
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path

from harness.errors import SparkbenchError
from harness.testbed import downloads
from harness.testbed.envs import MARKER, TESTBED_DIR, cache_root, ensure_model, env_python, model_dir, run_script

SDIST_NAME = "llama-cpp-python"
SDIST_VERSION = "0.3.36"
SDIST_SHA256 = "832db0699007f1be95a7e41ef12e88926b02ba836461e36a36372db2760c1a2e"
VENDORED = "vendor/llama.cpp"
# Only the server, statically linked, no web UI, no network code: the test bed needs nothing else.
CMAKE_FLAGS = (
    "-DCMAKE_BUILD_TYPE=Release", "-DBUILD_SHARED_LIBS=OFF", "-DLLAMA_CURL=OFF", "-DLLAMA_OPENSSL=OFF",
    "-DLLAMA_BUILD_TESTS=OFF", "-DLLAMA_BUILD_EXAMPLES=OFF", "-DLLAMA_BUILD_APP=OFF",
    "-DLLAMA_BUILD_UI=OFF", "-DLLAMA_USE_PREBUILT_UI=OFF",
)
# The tiny model's byte-level BPE is unknown to the converter's pre-tokenizer table; GPT-2's
# byte-level split is what its `tokenizers` ByteLevel pre-tokenizer does.
PRE_TOKENIZER = "gpt-2"
CONVERTER = TESTBED_DIR / "convert_gguf.py"
# The test bed serves the tiny model in bf16, and drafts for it with its own q8_0 copy.
GGUF_FILES = {"model.gguf": "bf16", "draft.gguf": "q8_0"}
# What a CUDA build on another machine does not need from the source.
STRIPPED = ("models", "docs", "media", "tests", "benches", "examples", "pocs", ".github")


def _short_hash(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()[:12]


def build_dir() -> Path:
    key = _short_hash("\n".join([SDIST_SHA256, *CMAKE_FLAGS]))
    return cache_root() / "llamacpp" / f"llama.cpp-{SDIST_VERSION}-{key}"


def server_binary() -> Path:
    return build_dir() / "bin" / "llama-server"


def source_dir() -> Path:
    return build_dir() / "source"


def require_server() -> Path:
    """The built `llama-server`; a one-line error says how to build it if it is missing."""
    if not (build_dir() / MARKER).exists():
        raise SparkbenchError(f"llama-server is not built ({build_dir()}); run `make llamacpp`")
    return server_binary()


def fetch_sdist() -> Path:
    """The pinned llama-cpp-python sdist, downloaded once and checked against its hash."""
    filename = f"{SDIST_NAME.replace('-', '_')}-{SDIST_VERSION}.tar.gz"
    return downloads.fetch_pinned(cache_root(), f"{SDIST_NAME}=={SDIST_VERSION}", filename, SDIST_SHA256,
                                "--no-binary", ":all:")


def extract_vendored(archive: Path, dest: Path) -> None:
    """Unpack only `vendor/llama.cpp` of the sdist into `dest`."""
    prefix = f"{archive.name.removesuffix('.tar.gz')}/{VENDORED}/"
    with tarfile.open(archive) as tar:
        members = []
        for member in tar.getmembers():
            if member.name.startswith(prefix):
                member.name = member.name[len(prefix):]
                members.append(member)
        tar.extractall(dest, members=members, filter="data")


def build_server(jobs: int | None = None) -> Path:
    """Build `llama-server` once (CPU, the server target only); print how long the build took."""
    folder = build_dir()
    if (folder / MARKER).exists():
        return server_binary()
    shutil.rmtree(folder, ignore_errors=True)
    archive = fetch_sdist()
    print(f"building llama-server into {folder} (about 15 minutes on 2 cores, once)", flush=True)
    extract_vendored(archive, source_dir())
    work = folder / "cmake-build"
    started = time.monotonic()
    subprocess.run(["cmake", "-S", str(source_dir()), "-B", str(work), "-G", "Ninja", *CMAKE_FLAGS], check=True)
    subprocess.run(["cmake", "--build", str(work), "--target", "llama-server", "-j", str(jobs or os.cpu_count())],
                   check=True)
    elapsed = time.monotonic() - started
    server_binary().parent.mkdir(parents=True, exist_ok=True)
    shutil.copy2(work / "bin" / "llama-server", server_binary())
    shutil.rmtree(work)
    load = os.getloadavg()[0]
    print(f"llama-server built in {elapsed:.0f} s with {jobs or os.cpu_count()} jobs (load average {load:.1f})")
    (folder / MARKER).write_text(f"built in {elapsed:.0f} s, load average {load:.1f}\n")
    return server_binary()


def gguf_model_dir() -> Path:
    """The test bed's GGUF model folder: `model.gguf` (the tiny model, bf16), `draft.gguf` (its
    q8_0 copy, to draft for it) and the tokenizer files, keyed by the tiny model and the pin."""
    return cache_root() / "models" / f"{model_dir().name}-gguf-{build_dir().name.removeprefix('llama.cpp-')}"


def convert_to_gguf(hf_dir: Path, out: Path, outtype: str, python: Path | None = None,
                    pre_tokenizer: str = PRE_TOKENIZER, extra: Sequence[object] = ()) -> Path:
    """Convert a Hugging Face model folder to one GGUF file with the pinned source's converter.

    The converter needs torch and transformers: it runs under the SGLang environment's Python
    (or `python`), through `convert_gguf.py`, which names the BPE pre-tokenizer; `extra` goes to
    the converter as given (an EAGLE-3 drafter's `--target-model-dir`).
    """
    partial = out.with_name(out.name + ".partial")
    run_script(python or env_python("sglang"), CONVERTER, source_dir(), pre_tokenizer, hf_dir,
               "--outfile", partial, "--outtype", outtype, *extra)
    partial.rename(out)
    return out


def ensure_gguf_model(python: Path | None = None) -> Path:
    """Build the test bed's GGUF model folder once (needs the built source and the tiny model);
    `python` runs the converter (default: the SGLang environment's)."""
    folder = gguf_model_dir()
    if (folder / MARKER).exists():
        return folder
    require_server()
    hf_dir = ensure_model()
    shutil.rmtree(folder, ignore_errors=True)
    folder.mkdir(parents=True)
    for name, outtype in GGUF_FILES.items():
        convert_to_gguf(hf_dir, folder / name, outtype, python)
    for path in hf_dir.glob("*token*"):  # the tokenizer: synthetic prompts are drawn from it
        shutil.copy2(path, folder / path.name)
    (folder / MARKER).write_text("ok\n")
    return folder


def pack_source(dest: Path) -> Path:
    """Write the pinned source without models, docs, tests and examples (about 10 MB), for machines
    that build llama.cpp themselves and reach no package index."""
    archive = fetch_sdist()
    with tempfile.TemporaryDirectory() as tmp:
        extract_vendored(archive, Path(tmp) / "llama.cpp")
        for folder in STRIPPED:
            shutil.rmtree(Path(tmp) / "llama.cpp" / folder, ignore_errors=True)
        dest.parent.mkdir(parents=True, exist_ok=True)
        with tarfile.open(dest, "w:gz") as tar:
            tar.add(Path(tmp) / "llama.cpp", arcname="llama.cpp")
    return dest


def main(argv: list[str]) -> None:
    """`python -m harness.testbed.llamacpp [server | pack DEST]`: build the server and the test bed's
    GGUF model folder once; `server` builds the server alone (it needs no model, so it compiles while
    the environments install); `pack DEST` writes the stripped source archive."""
    if argv[:1] == ["pack"] and len(argv) == 2:
        print(pack_source(Path(argv[1])))
        return
    if argv not in ([], ["server"]):
        raise SystemExit("usage: python -m harness.testbed.llamacpp [server | pack DEST]")
    print(build_server())
    if not argv:
        print(ensure_gguf_model())


if __name__ == "__main__":
    main(sys.argv[1:])
