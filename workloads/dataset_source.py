"""Reading a prompt file for the dataset workload: JSONL, JSON, CSV or Parquet, a Hugging Face
`datasets` folder (`save_to_disk`, or a folder of data files), or the name of a dataset already in
the local Hugging Face cache, all through the `datasets` library and never from the network.

A file is read into a temporary cache that is removed afterwards, so a run leaves nothing in the
user's Hugging Face cache; a cached name is read in offline mode. The digest is the sha256 of the
bytes the rows came from (the file's, as `sha256sum` prints it; a folder's files with their
relative paths; a cached dataset's Arrow files), so two runs on different data never share a workload spec.
"""

from __future__ import annotations

import hashlib
import json
import tempfile
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from harness.errors import SparkbenchError

BUILDERS = {".jsonl": "json", ".json": "json", ".csv": "csv", ".parquet": "parquet"}
SAVED_MARKERS = ("dataset_info.json", "state.json", "dataset_dict.json")  # written by `save_to_disk`


@dataclass(frozen=True)
class Source:
    """The rows of a prompt file, in file order, with what identifies the data."""

    rows: list[dict[str, Any]]
    sha256: str
    form: str  # jsonl, json, csv, parquet, saved (save_to_disk), folder (data files) or cached (a name)


def read_source(where: str, split: str) -> Source:
    """The rows at `where` (a path, else a cached dataset's name), `split` of a dataset that has
    several; every failure is one line naming `where`."""
    path = Path(where).expanduser()
    try:
        with _quiet_datasets():
            if path.is_file():
                return _file(path)
            if path.is_dir():
                return _folder(path, split)
            return _cached(where, split)
    except SparkbenchError:
        raise
    except Exception as exc:  # datasets and pyarrow raise many types for a file they cannot parse
        reason = (str(exc).strip().splitlines() or [type(exc).__name__])[0][:200]
        raise SparkbenchError(f"dataset {where}: cannot be read ({type(exc).__name__}: {reason})") from exc


@contextmanager
def _quiet_datasets():
    """No progress bars or info lines from `datasets` on the run's output."""
    import datasets

    datasets.disable_progress_bars()
    datasets.logging.set_verbosity(datasets.logging.CRITICAL)  # its error lines too: the refusal is one line
    yield


def _file(path: Path) -> Source:
    builder = BUILDERS.get(path.suffix.lower())
    if builder is None:
        raise SparkbenchError(f"dataset {path}: not a file the workload reads (give {', '.join(BUILDERS)}, or a "
                              "datasets folder)")
    import datasets

    rows = []
    if path.stat().st_size:  # `datasets` cannot read an empty file; it has no rows
        with tempfile.TemporaryDirectory(prefix="sparkbench-dataset-") as cache:
            try:
                rows = datasets.load_dataset(builder, data_files=str(path), split="train", cache_dir=cache).to_list()
            except Exception:
                if builder == "json":
                    _check_json(path)  # names the line and column that is not JSON, if one is
                raise
    with path.open("rb") as data:
        sha256 = hashlib.file_digest(data, "sha256").hexdigest()  # what `sha256sum FILE` prints
    return Source(rows, sha256, path.suffix.lower().lstrip("."))


def _check_json(path: Path) -> None:
    """A one-line SparkbenchError naming the first line (1-based, as editors count) and column of
    `path` that is not JSON: each line of a JSONL file is a JSON object of its own (blank lines
    are skipped), a JSON file is one document. `datasets` names neither the line nor the column."""
    with path.open(encoding="utf-8", errors="replace") as file:
        if path.suffix.lower() == ".json":
            try:
                json.load(file)
            except json.JSONDecodeError as exc:
                raise SparkbenchError(f"dataset {path} line {exc.lineno}, column {exc.colno}: not JSON ({exc.msg})") from None
            return
        for number, line in enumerate(file, start=1):
            if not line.strip():
                continue
            try:
                value = json.loads(line.rstrip("\r\n"))
            except json.JSONDecodeError as exc:
                raise SparkbenchError(f"dataset {path} line {number}, column {exc.colno}: not JSON ({exc.msg}); "
                                      "each line of a JSONL file is one JSON object") from None
            if not isinstance(value, dict):
                raise SparkbenchError(f"dataset {path} line {number}, column 1: a JSON {type(value).__name__}, not an "
                                      "object of columns") from None


def _folder(path: Path, split: str) -> Source:
    import datasets

    files = sorted(p for p in path.rglob("*") if p.is_file())
    if any((path / marker).is_file() for marker in SAVED_MARKERS):
        loaded = datasets.load_from_disk(str(path))
        table = loaded[_split_of(loaded, split, path)] if isinstance(loaded, datasets.DatasetDict) else loaded
        return Source(table.to_list(), _digest(files, path), "saved")
    with tempfile.TemporaryDirectory(prefix="sparkbench-dataset-") as cache:
        loaded = datasets.load_dataset(str(path), cache_dir=cache)
        rows = loaded[_split_of(loaded, split, path)].to_list()
    return Source(rows, _digest(files, path), "folder")


def _cached(name: str, split: str) -> Source:
    """A dataset by name from the local Hugging Face cache, with the hub switched off."""
    import datasets
    from huggingface_hub import constants

    was = (datasets.config.HF_HUB_OFFLINE, constants.HF_HUB_OFFLINE)
    datasets.config.HF_HUB_OFFLINE = constants.HF_HUB_OFFLINE = True
    try:
        loaded = datasets.load_dataset(name)
    except (FileNotFoundError, ConnectionError, ValueError) as exc:
        raise SparkbenchError(f"dataset {name}: no such file or folder, and not in the local Hugging Face cache "
                              "(the workload never downloads; fetch it first with `datasets`)") from exc
    finally:
        datasets.config.HF_HUB_OFFLINE, constants.HF_HUB_OFFLINE = was
    table = loaded[_split_of(loaded, split, Path(name))]
    files = [Path(entry["filename"]) for entry in table.cache_files]
    return Source(table.to_list(), _digest(files, None), "cached")


def _split_of(loaded: Any, split: str, where: Path) -> str:
    if split not in loaded:
        raise SparkbenchError(f"dataset {where}: no split {split!r} (it has {', '.join(loaded)}); pass --split")
    return split


def _digest(files: list[Path], root: Path | None) -> str:
    """sha256 over each file's name (relative to `root`; the base name without one) and bytes."""
    digest = hashlib.sha256()
    for file in files:
        name = file.relative_to(root).as_posix() if root is not None else file.name
        digest.update(f"{name}\n{file.stat().st_size}\n".encode())
        with file.open("rb") as data:
            for block in iter(lambda: data.read(1 << 20), b""):
                digest.update(block)
    return digest.hexdigest()
