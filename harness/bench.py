"""One benchmark run from start to finish: server, snapshot, run directory, requests, checks.

This is the glue the CLI calls; every stage it joins lives in its own module.
"""

from __future__ import annotations

import shutil
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from harness.client.sglang import SGLangBackend
from harness.embedded import SCALE_LABEL, EmbeddedServer, embedded_server
from harness.records import load_requests
from harness.rundir import RunDir, new_run_id
from harness.runner import Backend, RunOptions, execute, snapshot_server
from workloads import Workload


@dataclass(frozen=True)
class Target:
    """Where requests go: an attached server, or the embedded one this process started."""

    base_url: str
    embedded: EmbeddedServer | None = None

    @property
    def scale(self) -> str:
        return SCALE_LABEL if self.embedded else "as configured"


@contextmanager
def target_server(server_url: str | None) -> Iterator[Target]:
    """Attach to `server_url`, or start (and always stop) the embedded test-bed server."""
    if server_url:
        yield Target(base_url=server_url.rstrip("/"))
        return
    print(f"no --server given: starting the embedded default ({SCALE_LABEL})", file=sys.stderr, flush=True)
    with embedded_server() as embedded:
        yield Target(base_url=embedded.base_url, embedded=embedded)


def backend_for(name: str) -> Backend:
    return SGLangBackend()


def run_workload(
    target: Target,
    backend: Backend,
    make_workload: Callable[[dict[str, Any]], Workload],
    options: RunOptions,
    results_root: Path,
    extra_manifest: dict[str, Any] | None = None,
) -> RunDir:
    """Snapshot the server, build the workload, record every request, then finalize and check."""
    snapshot = snapshot_server(backend, target.base_url)
    workload = make_workload(snapshot)
    spec = workload.spec()
    manifest = {
        "workload": spec, "sampling": spec.get("sampling"), "server_url": target.base_url,
        "backend": backend.name, "scale": target.scale, "server": snapshot,
        "embedded_server": None if target.embedded is None else {
            "profile": target.embedded.profile, "model_dir": str(target.embedded.model_dir)},
        "options": {"warmup": options.warmup, "concurrency": options.concurrency,
                    "request_timeout_s": options.request_timeout_s},
        **(extra_manifest or {}),
    }
    run = RunDir.create(results_root, new_run_id(workload.name), manifest)
    try:
        execute(backend, options, workload, run)
    finally:
        _after_run(run, target, flag_cache_hits=bool(spec.get("requires_uncached_prompts")))
    return run


def _after_run(run: RunDir, target: Target, flag_cache_hits: bool) -> None:
    """Facts only known once requests are on disk: stream mode, prefix-cache hits, server log."""
    frame = load_requests(run.path)
    modes = sorted(set(frame["stream_mode"]) - {"unknown"}) or ["unknown"]
    cached = frame["cached_tokens"].fillna(0)
    hits = int((cached > 0).sum())
    run.update(stream_mode=modes[0] if len(modes) == 1 else "mixed", prefix_cache_hits=hits)
    if hits and flag_cache_hits:
        print(f"WARNING: the prefix cache served {int(cached.sum())} prompt tokens across {hits} of "
              f"{len(frame)} requests: prefill was not measured in full (see cached_tokens)",
              file=sys.stderr, flush=True)
    if target.embedded and target.embedded.log_path.exists():
        shutil.copy(target.embedded.log_path, run.path / "server.log")
