"""SGLang's two stream forms against real servers: cumulative (default) and incremental."""

from __future__ import annotations

import json

import pandas as pd
import pytest
import yaml

from harness.guard.profiles import shipped_profile_paths
from tests.e2e.conftest import launched, only_run_dir, sparkbench, synthetic_args

SHAPE = (2, 256, 48)  # prompts, input tokens, output tokens
FIXED = ("--seed", "3", "--salt", "11")  # same prompts on both servers


@pytest.fixture(scope="module")
def incremental_server(tmp_path_factory):
    profile = yaml.safe_load(shipped_profile_paths()["cpu-testbed"].read_text())
    profile["name"] = "cpu-testbed-incremental"
    profile["launch"]["args"].append("--incremental-streaming-output")
    path = tmp_path_factory.mktemp("profile") / "incremental.yaml"
    path.write_text(yaml.safe_dump(profile))
    with launched(str(path), label="incremental") as server:
        yield server


def _run(server, results):
    done = sparkbench(*synthetic_args(server, results, *SHAPE, *FIXED))
    assert done.returncode == 0, done.stderr
    run_dir = only_run_dir(results)
    return json.loads((run_dir / "manifest.json").read_text()), pd.read_parquet(run_dir / "requests.parquet")


def test_both_forms_record_the_same_greedy_output(sglang_server, incremental_server, tmp_path):
    cumulative_manifest, cumulative = _run(sglang_server, tmp_path / "cumulative")
    incremental_manifest, incremental = _run(incremental_server, tmp_path / "incremental")
    assert cumulative_manifest["stream_mode"] == "cumulative"
    assert incremental_manifest["stream_mode"] == "incremental"
    assert incremental_manifest["server"]["server_info"]["incremental_streaming_output"] is True
    for a, b in zip(cumulative.itertuples(), incremental.itertuples()):
        assert a.prompt_id == b.prompt_id
        assert list(a.output_ids) == list(b.output_ids) and len(b.output_ids) == SHAPE[2]
        assert a.output_text == b.output_text
        # Under load the server may put two tokens in one chunk: counts rise strictly to the total.
        counts = list(b.chunk_tokens)
        assert counts == sorted(set(counts)) and counts[-1] == SHAPE[2]
