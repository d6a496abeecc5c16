"""The llama.cpp test bed build: cache keys, the pinned archive's check, what is unpacked and packed."""

from __future__ import annotations

import io
import tarfile
from pathlib import Path

import pytest

from harness.errors import SparkbenchError
from harness.testbed import llamacpp


def make_sdist(path: Path, files: dict[str, str]) -> Path:
    """A tar.gz shaped like the llama-cpp-python sdist, holding `files` (paths inside the sdist)."""
    root = path.name.removesuffix(".tar.gz")
    with tarfile.open(path, "w:gz") as tar:
        for name, text in files.items():
            data = text.encode()
            info = tarfile.TarInfo(f"{root}/{name}")
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    return path


@pytest.fixture
def cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("SPARKBENCH_CACHE", str(tmp_path / "cache"))
    return tmp_path / "cache"


def test_build_folder_is_keyed_by_pin_and_flags(cache: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    first = llamacpp.build_dir()
    assert first.parent == cache / "llamacpp" and llamacpp.SDIST_VERSION in first.name
    monkeypatch.setattr(llamacpp, "CMAKE_FLAGS", (*llamacpp.CMAKE_FLAGS, "-DGGML_AVX512=OFF"))
    assert llamacpp.build_dir() != first
    monkeypatch.setattr(llamacpp, "SDIST_SHA256", "0" * 64)
    assert llamacpp.build_dir().name.startswith(f"llama.cpp-{llamacpp.SDIST_VERSION}-")


def test_missing_server_is_a_one_line_error_naming_the_make_target(cache: Path) -> None:
    with pytest.raises(SparkbenchError, match="make llamacpp"):
        llamacpp.require_server()


def test_an_archive_that_does_not_match_the_pin_is_refused(cache: Path) -> None:
    downloads = cache / "downloads"
    downloads.mkdir(parents=True)
    make_sdist(downloads / f"llama_cpp_python-{llamacpp.SDIST_VERSION}.tar.gz", {"README.md": "tampered"})
    with pytest.raises(SparkbenchError, match="sha256"):
        llamacpp.fetch_sdist()


def test_only_the_vendored_source_is_unpacked(tmp_path: Path) -> None:
    archive = make_sdist(tmp_path / "llama_cpp_python-9.9.9.tar.gz", {
        "llama_cpp/__init__.py": "", "vendor/llama.cpp/CMakeLists.txt": "project(x)",
        "vendor/llama.cpp/tools/server/server.cpp": "int main(){}",
    })
    llamacpp.extract_vendored(archive, tmp_path / "src")
    files = sorted(str(p.relative_to(tmp_path / "src")) for p in (tmp_path / "src").rglob("*") if p.is_file())
    assert files == ["CMakeLists.txt", "tools/server/server.cpp"]


def test_packed_source_leaves_out_models_docs_and_tests(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    archive = make_sdist(tmp_path / "llama_cpp_python-9.9.9.tar.gz", {
        "vendor/llama.cpp/CMakeLists.txt": "", "vendor/llama.cpp/models/big.gguf": "weights",
        "vendor/llama.cpp/docs/build.md": "", "vendor/llama.cpp/tests/test.cpp": "",
        "vendor/llama.cpp/ggml/src/ggml.c": "",
    })
    monkeypatch.setattr(llamacpp, "fetch_sdist", lambda: archive)
    packed = llamacpp.pack_source(tmp_path / "carry" / "src.tar.gz")
    with tarfile.open(packed) as tar:
        names = sorted(m.name for m in tar.getmembers() if m.isfile())
    assert names == ["llama.cpp/CMakeLists.txt", "llama.cpp/ggml/src/ggml.c"]


@pytest.mark.parametrize(("argv", "built"), [([], ["server", "gguf"]), (["server"], ["server"])])
def test_the_server_builds_without_the_model_so_it_can_compile_beside_the_environments(
        argv: list[str], built: list[str], monkeypatch: pytest.MonkeyPatch) -> None:
    done: list[str] = []
    monkeypatch.setattr(llamacpp, "build_server", lambda: done.append("server"))
    monkeypatch.setattr(llamacpp, "ensure_gguf_model", lambda: done.append("gguf"))
    llamacpp.main(argv)
    assert done == built


@pytest.mark.parametrize("argv", [["serve"], ["server", "extra"], ["pack"]])
def test_an_unknown_build_step_is_refused_with_its_usage(argv: list[str]) -> None:
    with pytest.raises(SystemExit, match=r"usage: python -m harness.testbed.llamacpp \[server \| pack DEST\]"):
        llamacpp.main(argv)
