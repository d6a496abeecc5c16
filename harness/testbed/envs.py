"""Server environments and the tiny model, cached outside the clone and keyed by content hashes.

Each engine lives in its own virtual environment (the engines want different torch builds and the
harness never imports an engine). An environment's folder name carries the hash of its pinned
requirements file, so a changed pin builds a new one and a warm machine reuses the old one. A
folder is only used once its `.complete` marker exists, so an interrupted install is redone.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import sys
from pathlib import Path

from harness.engines.registry import engine_named
from harness.errors import SparkbenchError

TESTBED_DIR = Path(__file__).resolve().parent
MARKER = ".complete"
# The models build_tiny_model.py makes: the tiny model and the speculative test pair built from it.
MODEL_VARIANTS = ("tiny", "bigram", "wrong-draft")


def cache_root() -> Path:
    return Path(os.environ.get("SPARKBENCH_CACHE", Path.home() / ".cache" / "sparkbench"))


def _digest(*paths: Path) -> str:
    h = hashlib.sha256()
    for path in paths:
        h.update(path.read_bytes())
    return h.hexdigest()[:12]


def requirements_file(engine: str) -> Path:
    """The pinned requirements of an engine's test-bed environment (one file per engine)."""
    path = TESTBED_DIR / f"requirements-{engine}.txt"
    if not path.is_file():
        known = sorted(p.stem.removeprefix("requirements-") for p in TESTBED_DIR.glob("requirements-*.txt"))
        raise SparkbenchError(f"unknown engine {engine!r}; choose one of {', '.join(known)}")
    return path


def env_dir(engine: str) -> Path:
    return cache_root() / "envs" / f"{engine}-{_digest(requirements_file(engine))}"


def env_python(engine: str) -> Path:
    """The Python of a ready environment; a one-line error says how to make it if it is missing."""
    folder = env_dir(engine)
    if not (folder / MARKER).exists():
        raise SparkbenchError(f"the {engine} environment is not installed ({folder}); run `make env-{engine}`")
    return folder / "bin" / "python"


def ensure_env(engine: str) -> Path:
    """Create the engine's environment if it is not there yet; return its Python."""
    folder = env_dir(engine)
    if (folder / MARKER).exists():
        return folder / "bin" / "python"
    shutil.rmtree(folder, ignore_errors=True)
    folder.parent.mkdir(parents=True, exist_ok=True)
    print(f"installing the {engine} environment into {folder} (several minutes, once)", flush=True)
    subprocess.run([sys.executable, "-m", "venv", str(folder)], check=True)
    pip = [str(folder / "bin" / "python"), "-m", "pip", "install", "--quiet", "--disable-pip-version-check"]
    subprocess.run([*pip, "-r", str(requirements_file(engine))], check=True)
    unused = engine_named(engine).testbed_remove_after_install
    if unused:
        subprocess.run([str(folder / "bin" / "python"), "-m", "pip", "uninstall", "--yes", "--quiet", *unused],
                       check=True)
    (folder / MARKER).write_text("ok\n")
    return folder / "bin" / "python"


def model_corpus() -> Path:
    from workloads.gsm8k import DATA_DIR  # the vendored GSM8K questions train the tokenizer

    return DATA_DIR / "test.jsonl"


def model_dir(variant: str = "tiny") -> Path:
    if variant not in MODEL_VARIANTS:
        raise SparkbenchError(f"unknown test-bed model {variant!r}; choose one of {', '.join(MODEL_VARIANTS)}")
    builder = TESTBED_DIR / "build_tiny_model.py"
    return cache_root() / "models" / f"{variant}-llama-{_digest(builder, model_corpus())}"


def ensure_model(variant: str = "tiny", engine: str = "sglang") -> Path:
    """Build a test-bed model once (with a server environment's torch) and return its folder."""
    folder = model_dir(variant)
    if (folder / MARKER).exists():
        return folder
    shutil.rmtree(folder, ignore_errors=True)
    python = env_python(engine)
    subprocess.run([str(python), str(TESTBED_DIR / "build_tiny_model.py"), str(model_corpus()), str(folder),
                    variant], check=True, env={**os.environ, "TOKENIZERS_PARALLELISM": "false"})
    (folder / MARKER).write_text("ok\n")
    return folder


def main(argv: list[str]) -> None:
    """`python -m harness.testbed.envs env ENGINE | model`: used by the Makefile."""
    what = argv[0] if argv else ""
    if what == "env" and len(argv) == 2:
        print(ensure_env(argv[1]))
    elif what == "model":
        for variant in MODEL_VARIANTS:
            print(ensure_model(variant))
    else:
        raise SystemExit("usage: python -m harness.testbed.envs env sglang|vllm | model")


if __name__ == "__main__":
    main(sys.argv[1:])
