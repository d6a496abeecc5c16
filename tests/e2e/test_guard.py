"""The configuration guard against real servers: passes what runs, refuses what does not."""

from __future__ import annotations

import json

from tests.e2e.conftest import only_run_dir, sparkbench, synthetic_args


def test_local_profile_passes_and_is_recorded(sglang_server, tmp_path):
    # The profile's checks, not the stream's (tests/unit/test_guard_stream.py holds that): a
    # host loaded from outside the suite can hold back every canary of a healthy server.
    done = sparkbench(*synthetic_args(sglang_server, tmp_path, 2, 256, 8, "--profile", "cpu-testbed",
                                      "--allow-buffered"))
    assert done.returncode == 0, done.stderr
    manifest = json.loads((only_run_dir(tmp_path) / "manifest.json").read_text())
    assert manifest["profile"]["name"] == "cpu-testbed"
    assert manifest["guard"]["ok"] is True
    assert manifest["guard"]["post_run"]["ok"] is True  # prefix cache served nothing


def test_profile_expecting_speculation_fails_before_measuring(sglang_server, tmp_path):
    done = sparkbench(*synthetic_args(sglang_server, tmp_path, 2, 256, 8, "--profile", "spark-mtp"))
    assert done.returncode == 2
    assert "does not run profile spark-mtp; nothing measured" in done.stderr
    assert "speculative_algorithm: expected 'NEXTN', server reports None" in done.stderr
    assert not any(tmp_path.iterdir())  # no run directory, no records


def test_no_guard_overrides_and_says_so(sglang_server, tmp_path):
    done = sparkbench(*synthetic_args(sglang_server, tmp_path, 1, 128, 4, "--profile", "spark-mtp", "--no-guard"))
    assert done.returncode == 0, done.stderr
    manifest = json.loads((only_run_dir(tmp_path) / "manifest.json").read_text())
    assert manifest["guard"] == {"skipped": "--no-guard"}


def test_ngram_canary_passes_on_real_vllm(vllm_ngram_server):
    # The accept length is what this checks; whether vLLM streams on a busy host is not (docs/vllm-streaming.md).
    done = sparkbench("check", "--profile", "vllm-cpu-ngram", "--server", vllm_ngram_server.base_url,
                      "--allow-buffered")
    assert done.returncode == 0, done.stderr
    assert any(line.startswith("ok   canary: accept length") for line in done.stdout.splitlines())


def test_canary_fails_when_drafts_are_never_accepted(vllm_never_accept_server):
    done = sparkbench("check", "--profile", "vllm-cpu-never-accept", "--server", vllm_never_accept_server.base_url)
    assert done.returncode == 2
    # The drafter never proposes: vLLM reports 0 drafting steps, which carry no accept length.
    assert ("canary: no verify round: the server reported no speculative statistics, or its drafter proposed "
            "nothing, but the profile expects ngram") in done.stderr
