"""Server environments made with uv: pip's sources handed over, the order of steps, the cache key."""

from __future__ import annotations

import fcntl
import shlex
import threading
from pathlib import Path

import pytest

from harness.errors import SparkbenchError
from harness.testbed import envs, install

PIP_CONFIG_LIST = """\
:env:.cert='/etc/ssl/certs/ca-certificates.crt'
:env:.find-links='/opt/wheels'
global.constraint='/etc/xdg/pip/constraints.txt'
global.extra-index-url='file:///opt/pypi/simple file:///opt/pypi-more/simple'
global.find-links='/srv/older-wheels'
"""


def test_pip_settings_follow_pips_precedence_environment_over_files():
    settings = install.parse_pip_config(PIP_CONFIG_LIST)
    assert settings["find-links"] == "/opt/wheels"
    assert settings["extra-index-url"] == "file:///opt/pypi/simple file:///opt/pypi-more/simple"
    assert settings["constraint"] == "/etc/xdg/pip/constraints.txt"


def test_uv_gets_every_pip_source_and_picks_the_best_version_across_them():
    options = install.uv_source_options(install.parse_pip_config(PIP_CONFIG_LIST))
    assert options == ["--extra-index-url", "file:///opt/pypi/simple", "--extra-index-url",
                       "file:///opt/pypi-more/simple", "--find-links", "/opt/wheels",
                       "--constraint", "/etc/xdg/pip/constraints.txt", "--index-strategy", "unsafe-best-match"]


def test_without_pip_configuration_uv_uses_its_defaults():
    assert install.uv_source_options({}) == []
    assert install.uv_source_options({"index-url": "https://mirror.example/simple"}) == [
        "--index-url", "https://mirror.example/simple"]


@pytest.fixture
def fake_uv(tmp_path: Path, monkeypatch) -> Path:
    """A uv that records each call and makes the folder `venv` names; `pip install` fails when
    FAKE_UV_FAIL is set."""
    calls = tmp_path / "calls.txt"
    uv = tmp_path / "uv"
    uv.write_text(f'#!/bin/sh\necho "$@" >> {shlex.quote(str(calls))}\nfor last; do :; done\n'
                  '[ "$1" = venv ] && mkdir -p "$last"\n'
                  '[ -n "$FAKE_UV_FAIL" ] && [ "$1 $2" = "pip install" ] && exit 3\nexit 0\n')
    uv.chmod(0o755)
    monkeypatch.setenv("SPARKBENCH_CACHE", str(tmp_path / "cache"))
    monkeypatch.setattr(install, "pip_settings", lambda uv: {"find-links": "/opt/wheels"})
    return uv


def recorded_calls(uv: Path) -> list[str]:
    return (uv.parent / "calls.txt").read_text().splitlines()


def test_vllm_environment_is_created_filled_from_pip_sources_then_trimmed(fake_uv):
    python = envs.ensure_env("vllm", fake_uv)
    folder = envs.env_dir("vllm")
    venv, pip_install, pip_uninstall = recorded_calls(fake_uv)
    assert venv.startswith("venv --quiet --python ") and venv.endswith(str(folder))
    assert pip_install.startswith(f"pip install --quiet --compile-bytecode --python {python} --find-links /opt/wheels")
    assert pip_install.endswith(str(envs.requirements_file("vllm")))
    assert pip_uninstall == f"pip uninstall --quiet --python {python} torchvision torchaudio torchcodec"
    assert envs.env_python("vllm") == python


def test_a_ready_environment_is_reused_without_calling_uv(fake_uv):
    envs.ensure_env("sglang", fake_uv)
    envs.ensure_env("sglang", fake_uv)
    assert len(recorded_calls(fake_uv)) == 2  # venv and install, once


def test_a_failed_install_is_one_line_and_leaves_the_environment_unusable(fake_uv, monkeypatch):
    monkeypatch.setenv("FAKE_UV_FAIL", "1")
    with pytest.raises(SparkbenchError, match=r"^`uv pip install` failed with exit code 3$"):
        envs.ensure_env("sglang", fake_uv)
    with pytest.raises(SparkbenchError, match="the sglang environment is not installed"):
        envs.env_python("sglang")


def test_a_missing_uv_says_how_to_get_it(tmp_path, monkeypatch):
    monkeypatch.setenv("SPARKBENCH_CACHE", str(tmp_path / "cache"))
    with pytest.raises(SparkbenchError, match="cannot run uv .*`make setup` installs it"):
        envs.ensure_env("sglang", tmp_path / "no-uv")


def test_the_cache_key_changes_with_the_way_of_installing(tmp_path, monkeypatch):
    installer = tmp_path / "install.py"
    installer.write_text("one way\n")
    monkeypatch.setattr(envs, "INSTALLER", installer)
    before = envs.env_dir("sglang")
    installer.write_text("another way\n")
    assert envs.env_dir("sglang") != before
    assert envs.env_dir("sglang").name.startswith("sglang-")


def test_an_environment_another_process_is_building_is_waited_for_not_built_again(fake_uv):
    folder = envs.env_dir("sglang")
    folder.parent.mkdir(parents=True)
    with open(folder.parent / f"{folder.name}.lock", "w") as held:
        fcntl.flock(held, fcntl.LOCK_EX)  # the other builder is at work
        waiter = threading.Thread(target=envs.ensure_env, args=("sglang", fake_uv))
        waiter.start()
        folder.mkdir()
        (folder / envs.MARKER).write_text("ok\n")
    waiter.join()
    assert not (fake_uv.parent / "calls.txt").exists()


PROJECT = Path(__file__).resolve().parents[2]


def test_no_project_code_runs_pip_with_a_python():
    """A uv environment has no pip: `python -m pip` works only where an earlier install happened to
    leave one, so project code runs pip through uv (`uv tool run --from pip`)."""
    offenders = []
    for path in [*PROJECT.glob("harness/**/*.py"), *PROJECT.glob("scripts/**/*.py"), *PROJECT.glob("tests/**/*.py")]:
        text = path.read_text()
        name = str(path.relative_to(PROJECT))
        if name != "tests/unit/test_install.py" and ('"-m", "pip"' in text or "-m pip " in text.replace("`", " ")):
            offenders.append(name)
    assert offenders == []


def test_pip_settings_are_read_by_pip_run_through_uv(monkeypatch):
    seen = []
    monkeypatch.setattr(install.subprocess, "run", lambda cmd, **kw: seen.append(cmd) or _Done())
    install.pip_settings(Path("/tools/uv"))
    assert seen == [["/tools/uv", "tool", "run", "--quiet", "--from", "pip", "pip", "config", "list"]]



class _Done:
    returncode = 0
    stdout = ""


def test_a_cached_folder_is_built_once_and_an_interrupted_build_is_redone(tmp_path):
    """build_once clears what an interrupted build left and writes the marker only after the build."""
    folder, calls = tmp_path / "model", []

    def build(fail: bool = False) -> None:
        calls.append(sorted(p.name for p in folder.iterdir()) if folder.exists() else None)
        folder.mkdir()
        (folder / "weights").write_text("w")
        if fail:
            raise RuntimeError("interrupted")

    with pytest.raises(RuntimeError):
        envs.build_once(folder, lambda: build(fail=True))
    assert not (folder / envs.MARKER).exists()
    assert envs.build_once(folder, build) == folder
    assert envs.build_once(folder, build) == folder
    assert calls == [None, None]  # the second build began from nothing; the third call built nothing
    assert (folder / envs.MARKER).exists()
