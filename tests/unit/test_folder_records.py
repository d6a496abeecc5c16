"""The typed manifests of a sweep and a capacity search (`harness.sweep.record`): a wrong type is one
line naming where, an older file still loads with what it held, and every change is checked again."""

from __future__ import annotations

import json
import math

import pytest
from pydantic import ValidationError

from harness.config import validated
from harness.errors import SparkbenchError
from harness.sweep.config import SweepConfig
from harness.sweep.record import CapacityRecord, TrialEntry
from harness.sweep.sweepdir import SWEEP_MANIFEST, CellOutcome, SweepDir


@pytest.fixture
def sweep(tmp_path) -> SweepDir:
    config = {"results": str(tmp_path), "concurrency": [1, 2],
              "configurations": [{"name": "base", "server": "http://127.0.0.1:30000"}],
              "workloads": [{"name": "synthetic", "options": {"num_prompts": 4}}]}
    return SweepDir.create(validated(SweepConfig, config, "sweep config"))


def _rewrite(sweep: SweepDir, change) -> None:
    file = sweep.path / SWEEP_MANIFEST
    manifest = json.loads(file.read_text())
    change(manifest)
    file.write_text(json.dumps(manifest))


def test_a_cell_of_the_wrong_type_is_one_line_naming_it(sweep):
    _rewrite(sweep, lambda m: m["cells"]["base.synthetic.c2"].update(concurrency="2"))
    with pytest.raises(SparkbenchError) as refused:
        SweepDir.load(sweep.path)
    [line] = str(refused.value).splitlines()
    assert line.startswith(f"{sweep.path / SWEEP_MANIFEST}: cells.base.synthetic.c2.concurrency: ")


def test_an_older_sweep_manifest_loads_and_keeps_what_it_held(sweep):
    def older(manifest):
        del manifest["record_version"], manifest["runs"]
        manifest["written_by_another_version"] = {"kept": True}
    _rewrite(sweep, older)
    loaded = SweepDir.load(sweep.path)
    assert loaded.record.record_version == 1 and loaded.record.runs == []
    loaded.record_outcome(CellOutcome("base.synthetic.c1", "failed", None, "cannot reach the server"))
    saved = json.loads((sweep.path / SWEEP_MANIFEST).read_text())
    assert saved["written_by_another_version"] == {"kept": True}
    assert saved["cells"]["base.synthetic.c1"]["status"] == "failed"


def test_a_capacity_record_checks_each_change():
    record = CapacityRecord(capacity_id="capacity-1", settings={"attainment": 0.99})
    with_trial = record.updated(trials=[TrialEntry(rate=2.0, attainment=1.0, ci95_low=math.nan)])
    assert with_trial.trials[0].rate == 2.0 and with_trial.status is None  # still searching
    with pytest.raises(ValidationError, match="capacity_rps"):
        with_trial.updated(capacity_rps="fast")


def test_a_finished_capacity_record_reads_back_its_bracket_from_json():
    record = CapacityRecord.of({"capacity_id": "c", "settings": {}, "bracket": (11.7, None)}, "capacity.json")
    again = CapacityRecord.of(json.loads(json.dumps(record.model_dump(mode="json"))), "capacity.json")
    assert again.bracket == (11.7, None)
