"""Every `sparkbench ...` command shown in README.md, docs/*.md and the example traces' README is
accepted as written, up to the point where a server is needed.

A command is taken from a fenced block (a line beginning `sparkbench` or `.venv/bin/sparkbench`,
with its `\\` continuations; a trailing `# comment` dropped) or from an inline code span. It is one of:
- a command to run: the placeholder URL (and any `*_URL`, and the hosts the docs name) becomes an
  address where nothing listens, and the command runs in a folder that holds the repository's
  `workloads/` and `docs/` and the user's files the docs name; the first request to a server (any
  HTTP request) or the first server process to be started ends it. It must end there, or exit 0
  (help, `profiles`): its options parsed and its input checked before any server was asked;
- a synopsis (a placeholder such as RUN, FILE or NAME, `[optional]` parts or `...`): its command
  exists and each option it names is one of that command's;
- a bare name (`sparkbench run`, `sparkbench agree`): the command exists.
EXCEPTIONS lists the commands that cannot be run here, each with its reason.
"""

from __future__ import annotations

import functools
import re
import shlex
import subprocess
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest
import typer
from typer.testing import CliRunner

from harness.cli import app

ROOT = Path(__file__).parents[2]
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md")), ROOT / "workloads/data/traces/README.md"]
NOWHERE = "http://127.0.0.1:9"  # no server listens: nothing here may reach one anyway
PLACEHOLDER = re.compile(r"^[A-Z][A-Z0-9_]*(:[A-Z0-9]+)?(\.\.\.)?$|\.\.\.|^\[|\]$|<")
URL_WORD = re.compile(r"^[A-Z_]*URL$|^https?://")

# Commands that cannot run here, each with why (the text as the page shows it).
EXCEPTIONS = {
    "sparkbench run dataset --path my_saved_dataset/ --split test --chat --backend openai --server URL":
        "a `datasets` folder of the user's own, with a test split",
    "sparkbench sweep --config ladder.yaml": "a config the page describes in part (its two profiles' ladder)",
}


@dataclass(frozen=True)
class Shown:
    page: str
    line: int
    text: str

    def __str__(self) -> str:
        return f"{self.page}:{self.line}: {self.text}"


def shown_commands() -> list[Shown]:
    found: list[Shown] = []
    for page in PAGES:
        inside, pending, label = False, None, str(page.relative_to(ROOT))
        for number, line in enumerate(page.read_text(encoding="utf-8").splitlines(), 1):
            text = line.strip()
            if text.startswith("```"):
                inside = not inside
                continue
            if inside and pending is not None:
                pending = (pending[0], pending[1] + " " + text.rstrip("\\").strip())
            elif inside and re.match(r"^(\.venv/bin/)?sparkbench( [a-z-]|$)", text):
                pending = (number, text.removeprefix(".venv/bin/").rstrip("\\").strip())
            elif not inside:
                found += [Shown(label, number, m) for m in re.findall(r"`(?:\.venv/bin/)?(sparkbench(?: [a-z-][^`]*)?)`", line)]
            if pending is not None and not text.endswith("\\"):
                found.append(Shown(label, pending[0], re.sub(r"\s+#\s.*$", "", pending[1]).strip()))
                pending = None
    return found


SHOWN = shown_commands()


def words_of(text: str) -> list[str]:
    return shlex.split(text)[1:]


@functools.cache
def root() -> Any:
    """The command line as click commands (built once: it takes a while)."""
    return typer.main.get_command(app)


def command_at(words: list[str]) -> tuple[Any, list[str]]:
    """The click command the leading words name, and the words after it."""
    command = root()
    while words and words[0] in getattr(command, "commands", {}):
        command, words = command.commands[words[0]], words[1:]
    return command, words


def kind(shown: Shown) -> str:
    """`synopsis`, `name` or `run` (module docstring). A command with only option names after it
    (`sparkbench sweep --ray`) names those options: a synopsis too."""
    words = words_of(shown.text)
    if any(PLACEHOLDER.search(part) for w in words if not URL_WORD.match(w) for part in w.split("/")):
        return "synopsis"
    rest = command_at(words)[1]
    if not rest:
        return "name"
    if all(w.startswith("--") for w in rest) and "--help" not in rest:
        return "synopsis"
    return "run"


class ServerAsked(BaseException):
    """The command got as far as asking a server (or starting one): everything before it passed."""


@pytest.fixture
def no_server(monkeypatch, tmp_path):
    """A folder like a checkout with the user's files the docs name, where no server can be asked."""
    def asked(*args, **kwargs):
        raise ServerAsked

    real_popen = subprocess.Popen

    def popen(argv, *args, **kwargs):
        if list(argv)[:1] == ["git"]:
            return real_popen(argv, *args, **kwargs)
        raise ServerAsked

    monkeypatch.setattr(httpx.Client, "send", asked)
    monkeypatch.setattr(httpx.AsyncClient, "send", asked)
    monkeypatch.setattr(subprocess, "Popen", popen)
    for name in ("workloads", "docs", "profiles"):
        if (ROOT / name).exists():
            (tmp_path / name).symlink_to(ROOT / name)
    (tmp_path / "results").mkdir()  # the kept reference runs the docs compare; what a command writes stays here
    (tmp_path / "results" / "reference").symlink_to(ROOT / "results" / "reference")
    rows = "".join(f'{{"prompt": "question {i}", "output_tokens": {16 + i}}}\n' for i in range(8))
    (tmp_path / "prompts.jsonl").write_text(rows, encoding="utf-8")
    sharegpt = ROOT / "workloads/data/dataset/example_sharegpt.json"
    (tmp_path / "ShareGPT_V3_unfiltered_cleaned_split.json").write_bytes(sharegpt.read_bytes())
    monkeypatch.chdir(tmp_path)


def test_the_pages_show_commands_of_each_kind():
    kinds = [kind(shown) for shown in SHOWN]
    assert len(SHOWN) > 80 and {"run", "synopsis", "name"} <= set(kinds)
    assert set(EXCEPTIONS) <= {shown.text for shown in SHOWN}  # an exception for a command no page shows is stale


@pytest.mark.parametrize("shown", [s for s in SHOWN if kind(s) == "run"], ids=str)
def test_a_shown_command_is_accepted_up_to_the_server(shown, no_server):
    if shown.text in EXCEPTIONS:
        pytest.skip(EXCEPTIONS[shown.text])
    words = [NOWHERE if URL_WORD.match(w) else w for w in words_of(shown.text)]
    try:
        done = CliRunner().invoke(app, words)
    except ServerAsked:
        return
    assert done.exit_code == 0, f"{shown}\n{done.output}{done.exception!r}"


@pytest.mark.parametrize("shown", [s for s in SHOWN if kind(s) != "run"], ids=str)
def test_a_synopsis_or_a_name_is_a_command_with_those_options(shown):
    command, rest = command_at(words_of(shown.text))
    assert command is not root() or not rest, f"{shown}: no such command"
    # `sparkbench run ... --flag`, `sparkbench run --flag`: an option of the group's commands (every workload)
    commands = list(command.commands.values()) if hasattr(command, "commands") else [command]
    options = {opt.split("=")[0] for each in commands for param in each.params
               for opt in (*param.opts, *param.secondary_opts)}
    named = [w.split("=")[0].strip("[]") for w in rest if w.strip("[").startswith("--")]
    assert not [w for w in named if w not in options], f"{shown}: not options of {command.name}"
