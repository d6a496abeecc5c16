"""`sparkbench agree`: top-k agreement between two servers, its options from `AgreeOptions`."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from harness.agree.options import AgreeOptions
from harness.cli.app import app
from harness.cli.binding import Group, bind, given
from harness.config import validated
from harness.run.options import RunSettings
from harness.secrets import api_key


@app.command("agree")
@bind(options=Group(AgreeOptions),
      credentials=Group(RunSettings, skip=frozenset(RunSettings.model_fields) - {"api_key"}))
def agree(
    options: dict,
    credentials: dict,
    reference: Annotated[str, typer.Option(help="Base URL of the reference server (e.g. the BF16 head).")],
    candidate: Annotated[str, typer.Option(help="Base URL of the candidate server (e.g. the FP8 head).")],
    results: Annotated[Path, typer.Option(help="Folder that receives <run_id>/ (kept apart from benchmark "
                                               "runs, which compare and report read).")] = Path("results/agree"),
) -> None:
    """Top-k agreement: both servers score the same teacher-forced token sequences, position by position."""
    from harness.agree.report import headline, write_report
    from harness.agree.run import run_agreement

    chosen = validated(AgreeOptions, given(options), "agree")
    key = api_key(credentials["api_key"])  # else from the environment, as for a run
    run = run_agreement({"reference": reference, "candidate": candidate}, chosen, results,
                        headers=RunSettings(api_key=key).headers)
    html, _ = write_report(run.path)
    print(f"{headline(run.path)}\nrun: {run.path}\nreport: {html}")
