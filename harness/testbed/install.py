"""How a server environment is created and filled: uv, with the package sources pip is set up for.

uv installs in parallel and links files from its cache, so an environment that took pip minutes
takes uv seconds once the wheels are downloaded. uv does not read pip's configuration, yet a machine
may keep large wheels on local disk for pip (a CPU torch build in a `find-links` folder, a local
index): installing without them would download different builds, or gigabytes pip never fetched.
So the sources pip is configured with are handed to uv, and uv picks the best version across all
of them, as pip does (`unsafe-best-match`; uv's default takes the first index that has a package).
Bytecode is compiled at install, as pip does: where PYTHONDONTWRITEBYTECODE is set, nothing else
writes it, and every server start would compile SGLang's imports again (about three times the CPU).
"""

from __future__ import annotations

import shlex
import subprocess
import sys
from pathlib import Path

from harness.errors import SparkbenchError

# pip setting -> uv option; each value may list several entries separated by white space.
PIP_TO_UV = {
    "index-url": "--index-url",
    "extra-index-url": "--extra-index-url",
    "find-links": "--find-links",
    "constraint": "--constraint",
}
# A setting in the environment overrides the install section, which overrides the global one.
SECTION_PRECEDENCE = ("global", "install", ":env:")


def parse_pip_config(listing: str) -> dict[str, str]:
    """`pip config list` lines (`section.key='value'`) -> {key: value} by pip's precedence."""
    ranked: dict[str, tuple[int, str]] = {}
    for line in listing.splitlines():
        name, sep, quoted = line.partition("=")
        section, _, key = name.rpartition(".")
        if not sep or section not in SECTION_PRECEDENCE:
            continue
        rank = SECTION_PRECEDENCE.index(section)
        if key not in ranked or rank >= ranked[key][0]:
            ranked[key] = (rank, " ".join(shlex.split(quoted)))
    return {key: value for key, (_, value) in ranked.items()}


def uv_source_options(pip_settings: dict[str, str]) -> list[str]:
    """uv options that reach the same packages as pip with these settings."""
    options = [opt for key, flag in PIP_TO_UV.items() for value in pip_settings.get(key, "").split()
               for opt in (flag, value)]
    if pip_settings.get("no-index", "").lower() in ("1", "true", "yes", "on"):
        options.append("--no-index")
    if any(flag in options for flag in ("--extra-index-url", "--find-links")):
        options += ["--index-strategy", "unsafe-best-match"]
    return options


def pip_settings(uv: Path) -> dict[str, str]:
    """This machine's pip configuration (files and PIP_* variables), read by pip run through uv:
    a uv-made environment has no pip of its own, and the base Python may have none either. None
    when pip cannot be run."""
    listing = subprocess.run([str(uv), "tool", "run", "--quiet", "--from", "pip", "pip", "config", "list"],
                             capture_output=True, text=True)
    return parse_pip_config(listing.stdout) if listing.returncode == 0 else {}


def run_uv(uv: Path, *args: str) -> None:
    """Run uv; a failure is one line that names the command (uv has printed why above it)."""
    try:
        done = subprocess.run([str(uv), *args])
    except OSError as exc:
        raise SparkbenchError(f"cannot run uv ({uv}): {exc.strerror}; `make setup` installs it") from None
    if done.returncode != 0:
        raise SparkbenchError(f"`uv {' '.join(args[:2])}` failed with exit code {done.returncode}")


def create_env(uv: Path, folder: Path) -> Path:
    """A new virtual environment on the interpreter running the harness; returns its Python."""
    run_uv(uv, "venv", "--quiet", "--python", sys.executable, str(folder))
    return folder / "bin" / "python"


def install_requirements(uv: Path, python: Path, requirements: Path) -> None:
    """Install a requirements file into the environment of `python`, from pip's sources."""
    run_uv(uv, "pip", "install", "--quiet", "--compile-bytecode", "--python", str(python),
           *uv_source_options(pip_settings(uv)), "-r", str(requirements))


def uninstall(uv: Path, python: Path, packages: list[str]) -> None:
    run_uv(uv, "pip", "uninstall", "--quiet", "--python", str(python), *packages)
