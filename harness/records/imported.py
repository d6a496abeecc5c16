"""What an imported run folder holds (`sparkbench import`): another tool's results, as it defined them.

The manifest's `imported` entry names the tool, its version where the file says it, the source file
and each figure's definition in that tool. `imported_requests.parquet` holds the tool's per-request
figures where it kept them (absent: the tool kept only aggregates, and `per_request` says so);
`imported_aggregates.csv` holds the aggregates the tool itself computed, under its own field names.
The manifest reads this module, and the command line's help the manifest: no table library here
(`harness.analysis.imported` reads the tables).
"""

from __future__ import annotations

from pydantic import ConfigDict

from harness.config import StrictModel

REQUESTS_NAME = "imported_requests.parquet"
AGGREGATES_NAME = "imported_aggregates.csv"
# The per-request table: one row per request the tool sent, figures in the tool's definitions
# (`ImportEntry.definitions`), None where the tool did not measure them.
REQUEST_COLUMNS = ["seq", "prompt_id", "status", "error_message", "prompt_tokens", "completion_tokens",
                   "ttft_ms", "tpot_ms", "e2e_ms", "itl_ms", "output_text"]
# The tool's aggregates: `metric` is sparkbench's name where the tool defines a like figure (its
# definition in `ImportEntry.definitions`), else the tool's own; `tool_field` is the tool's key.
AGGREGATE_COLUMNS = ["metric", "stat", "value", "unit", "tool_field"]


class ImportEntry(StrictModel):
    """The manifest's account of an imported file."""

    model_config = ConfigDict(strict=True, extra="forbid", frozen=True)

    tool: str
    tool_version: str | None = None  # None: the file does not say
    source: str
    source_sha256: str
    per_request: bool
    note: str
    definitions: dict[str, str]
    server_version: str | None = None
