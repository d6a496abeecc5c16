"""Did speculation change an answer, on real servers: llama.cpp plain and with the real model drafting
for itself (greedy), checked by `sparkbench fidelity`; the same pair through a proxy that corrupts
one output token of every answer (a planted defect) is caught, the healthy pair is not."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from harness.analysis.run import Run
from harness.analysis.tables import run_warnings
from tests.e2e.conftest import only_run_dir, sparkbench
from tests.e2e.proxy import corrupt_token, recording_proxy

QUESTIONS = 3
TOKENS = 32
CORRUPTED = 5  # the output token the planted defect replaces


def _greedy(url: str, results: Path) -> Path:
    done = sparkbench("run", "gsm8k", "--server", url, "--limit", str(QUESTIONS), "--max-new-tokens", str(TOKENS),
                      "--temperature", "0", "--results", str(results), "--no-progress")
    assert done.returncode == 0, done.stderr
    return only_run_dir(results)


@pytest.fixture(scope="module")
def plain_run(real_llamacpp_server, tmp_path_factory) -> Path:
    return _greedy(real_llamacpp_server.base_url, tmp_path_factory.mktemp("plain"))


def _fidelity(plain: Path, spec: Path, server) -> tuple[int, dict]:
    done = sparkbench("fidelity", str(plain), str(spec), "--server", server.base_url)
    assert done.returncode in (0, 1), done.stderr
    return done.returncode, json.loads((spec / "fidelity.json").read_text())


def test_speculation_that_changes_no_answer_passes(plain_run, real_llamacpp_server, real_llamacpp_draft_server,
                                                    tmp_path):
    spec = _greedy(real_llamacpp_draft_server.base_url, tmp_path)
    code, outcome = _fidelity(plain_run, spec, real_llamacpp_server)
    assert code == 0 and outcome["defect"] == 0, outcome
    assert outcome["pairs"] == QUESTIONS and outcome["unmeasured"] == 0, outcome
    assert (spec / "fidelity.csv").is_file()


def test_a_server_that_corrupts_a_token_is_caught(plain_run, real_llamacpp_server, real_llamacpp_draft_server,
                                                  tmp_path):
    with recording_proxy(real_llamacpp_draft_server.base_url, rewriting=corrupt_token(CORRUPTED)) as (url, _):
        spec = _greedy(url, tmp_path)
    code, outcome = _fidelity(plain_run, spec, real_llamacpp_server)
    assert code == 1 and outcome["defect"] >= 1 and outcome["verdict"].startswith("CHANGED"), outcome
    # the report's warnings of the speculative run carry the verdict
    assert any("CHANGED" in line for line in run_warnings(Run.load(spec))), run_warnings(Run.load(spec))
