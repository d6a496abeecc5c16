"""Server environments and the tiny model, cached outside the clone and keyed by content hashes.

Each engine lives in its own virtual environment (the engines want different torch builds and the
harness never imports an engine). An environment's folder name carries the hash of its pinned
requirements file and of the module that installs it, so a changed pin or a changed way of
installing builds a new one and a warm machine reuses the old one. A folder is only used once its
`.complete` marker exists, so an interrupted install is redone; a lock beside it lets one process
build it while others wait.
"""

from __future__ import annotations

import argparse
import fcntl
import hashlib
import os
import shutil
import subprocess
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

from harness.engines.registry import engine_named
from harness.errors import SparkbenchError
from harness.testbed import install

TESTBED_DIR = Path(__file__).resolve().parent
MARKER = ".complete"
# The models build_tiny_model.py makes: the tiny model and the speculative test pair built from it.
MODEL_VARIANTS = ("tiny", "bigram", "wrong-draft")
INSTALLER = Path(install.__file__)


def cache_root() -> Path:
    return Path(os.environ.get("SPARKBENCH_CACHE", Path.home() / ".cache" / "sparkbench"))


def server_logs_dir() -> Path:
    """Where started servers write their logs: SPARKBENCH_SERVER_LOGS, else the cache's logs folder.
    A test tier names a folder of its own, so that counting its launches counts no other tier's."""
    return Path(os.environ.get("SPARKBENCH_SERVER_LOGS") or cache_root() / "logs")


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
    return cache_root() / "envs" / f"{engine}-{_digest(requirements_file(engine), INSTALLER)}"


def env_python(engine: str) -> Path:
    """The Python of a ready environment; a one-line error says how to make it if it is missing."""
    folder = env_dir(engine)
    if not (folder / MARKER).exists():
        raise SparkbenchError(f"the {engine} environment is not installed ({folder}); run `make env-{engine}`")
    return folder / "bin" / "python"


@contextmanager
def _sole_builder(folder: Path) -> Iterator[bool]:
    """Hold the folder's lock and say whether it still needs building: a second make or test
    session that wants the same cached folder waits, then uses the first one's work."""
    folder.parent.mkdir(parents=True, exist_ok=True)
    with open(folder.parent / f"{folder.name}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        yield not (folder / MARKER).exists()


def build_once(folder: Path, build: Callable[[], None]) -> Path:
    """The cached `folder`, made by `build` unless its marker says a build finished; what an interrupted
    build left is cleared first, and the marker is written only after `build` returns."""
    with _sole_builder(folder) as needed:
        if needed:
            shutil.rmtree(folder, ignore_errors=True)
            build()
            (folder / MARKER).write_text("ok\n")
    return folder


def run_script(python: Path, *args: object) -> None:
    """A build script under a server environment's Python (torch, transformers), with the tokenizers'
    thread pool off: it warns, and can hang, once the script forks."""
    subprocess.run([str(python), *map(str, args)], check=True,
                   env={**os.environ, "TOKENIZERS_PARALLELISM": "false"})


def ensure_env(engine: str, uv: Path) -> Path:
    """Create the engine's environment with uv if it is not there yet; return its Python."""
    folder = env_dir(engine)
    with _sole_builder(folder) as needed:
        if needed:
            _install_env(engine, folder, uv)
    return folder / "bin" / "python"


def _install_env(engine: str, folder: Path, uv: Path) -> None:
    shutil.rmtree(folder, ignore_errors=True)  # what an interrupted install left
    print(f"installing the {engine} environment into {folder} (once)", flush=True)
    python = install.create_env(uv, folder)
    install.install_requirements(uv, python, requirements_file(engine))
    unused = engine_named(engine).testbed_remove_after_install
    if unused:
        install.uninstall(uv, python, list(unused))
    (folder / MARKER).write_text("ok\n")


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
    return build_once(folder, lambda: run_script(env_python(engine), TESTBED_DIR / "build_tiny_model.py",
                                                 model_corpus(), folder, variant))


def main(argv: list[str]) -> None:
    """`python -m harness.testbed.envs env ENGINE --uv PATH | model`: used by the Makefile."""
    parser = argparse.ArgumentParser(prog="python -m harness.testbed.envs")
    commands = parser.add_subparsers(dest="what", required=True)
    env = commands.add_parser("env", help="install a server environment")
    env.add_argument("engine", help="an engine with a requirements-ENGINE.txt here")
    env.add_argument("--uv", type=Path, required=True, help="the uv executable that installs it")
    commands.add_parser("model", help="build the test-bed models")
    args = parser.parse_args(argv)
    try:
        if args.what == "env":
            print(ensure_env(args.engine, args.uv))
        else:
            for variant in MODEL_VARIANTS:
                print(ensure_model(variant))
    except SparkbenchError as exc:
        print(f"sparkbench: {exc}", file=sys.stderr)
        raise SystemExit(exc.exit_code) from None


if __name__ == "__main__":
    main(sys.argv[1:])
