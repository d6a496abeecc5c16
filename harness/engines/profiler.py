"""An engine's own profiler, started and stopped over HTTP (`harness.run.server_profile`).

SGLang serves `POST /start_profile` and `POST /stop_profile` always: the start request names the
trace folder (`output_dir`) and the file's id (`profile_id`), and the stop request returns once the
torch profiler's trace, `<profile_id>-TP-<rank>.trace.json.gz`, is written there. vLLM serves the
same two routes only when it was started with a profiler (`--profiler-config`), and writes where
that configuration says; its start request names no folder. llama.cpp has no such endpoint.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any


@dataclass(frozen=True)
class ServerProfiler:
    """How an engine's profiler is driven."""

    start_path: str = "/start_profile"
    stop_path: str = "/stop_profile"
    names_folder: bool = True  # the start request names the trace folder; else the server chose it at launch
    needs: str = ""  # what a server of this engine needs to serve the routes at all

    def start_body(self, folder: Path, profile_id: str) -> dict[str, Any] | None:
        """The start request's JSON body (None: the request has none)."""
        return {"output_dir": str(folder), "profile_id": profile_id} if self.names_folder else None
