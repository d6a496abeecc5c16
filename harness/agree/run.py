"""One agreement run: build the forced sequences, have both servers score them, write the tables.

`results/<run_id>/` holds `manifest.json` (both servers' facts, the workload, k, the source),
`sequences.jsonl` (the token ids scored) and `scores.jsonl` (one row per server and sequence,
appended and flushed as each answer arrives: the source of truth), then the derived tables
`positions.parquet`, `summary.csv`, `bands.csv`, `shifts.csv` and `by_margin.csv`, written
whatever stopped the run.
"""

from __future__ import annotations

import json
from dataclasses import asdict
from pathlib import Path

import httpx

from harness.agree.metrics import BAND_EDGES
from harness.agree.options import AgreeOptions
from harness.agree.sequences import ForcedSequence, Tokenizer, build_sequences, load_sequences
from harness.agree.servers import Server, connect
from harness.agree.tables import agreement_by_margin, bands_table, positions_table, shifts_table, summary_table
from harness.engines.base import MalformedStream, ServerHTTPError, ServerUnreachable
from harness.engines.control import BoundedClient
from harness.engines.scoring import CannotScore, ScoredTokens
from harness.errors import SparkbenchError
from harness.records.rundir import RunDir, new_run_id
from harness.run.runner import RunAborted
from workloads.gsm8k import GSM8KWorkload

ROLES = ("reference", "candidate")
SEQUENCES, SCORES = "sequences.jsonl", "scores.jsonl"
TABLES = {"summary": "summary.csv", "bands": "bands.csv", "shifts": "shifts.csv", "by_margin": "by_margin.csv"}
POSITIONS = "positions.parquet"
PROBE_TEXT = "Question: what is 1 + 1?"
KL_NOTE = ("KL(reference || candidate) on the union of both top-k sets, each renormalized on it; a token "
           "outside one server's top-k takes that server's k-th log-probability (an upper bound)")


def _manifest(http: httpx.Client, servers: dict[str, Server], options: AgreeOptions, workload: GSM8KWorkload,
              tokenizer: Tokenizer) -> dict:
    return {
        "kind": "agreement", "workload": {**workload.spec(), "name": "agree"},
        "agreement": {**options.model_dump(mode="json"), "tokenizer": str(tokenizer.folder), "kl_approximation": KL_NOTE,
                      "band_edges": list(BAND_EDGES)},
        "servers": {role: {"url": servers[role].url, "engine": servers[role].engine.name,
                           "facts": servers[role].snapshot(http)} for role in ROLES},
    }


def _score_row(role: str, seq: ForcedSequence, scored: ScoredTokens) -> str:
    return json.dumps({"role": role, "prompt_id": seq.prompt_id, **asdict(scored)})


def _score_all(run: RunDir, sequences: list[ForcedSequence], servers: dict[str, Server], http: httpx.Client,
               k: int) -> None:
    with (run.path / SCORES).open("a", encoding="utf-8") as out:
        for seq in sequences:
            for role in ROLES:
                scored = servers[role].score(http, seq.token_ids, seq.start, k)
                out.write(_score_row(role, seq, scored) + "\n")
                out.flush()


def run_agreement(urls: dict[str, str], options: AgreeOptions, results_root: Path,
                  transport: httpx.AsyncBaseTransport | None = None, headers: dict[str, str] | None = None) -> RunDir:
    """Score the same forced sequences on both servers; always leave the tables of what was scored.

    `transport` replaces the network (tests serve recorded answers through it); `headers` carry the
    credentials (`RunSettings.headers`), sent to both servers and written nowhere."""
    workload = GSM8KWorkload(limit=options.limit, offset=options.offset, shot_seed=options.shot_seed)
    # A total deadline per request: a server trickling bytes cannot hold a scoring request open.
    with BoundedClient(deadline_s=options.request_timeout_s, headers=headers, transport=transport) as http:
        servers = {role: connect(http, urls[role]) for role in ROLES}
        tokenizer = Tokenizer(options.tokenizer or servers["reference"].model_folder(http))
        _check_can_score(servers, http, tokenizer, options.top_k)
        run = RunDir.create(results_root, new_run_id("agree"), _manifest(http, servers, options, workload, tokenizer))
        try:
            status, error = _execute(run, workload, tokenizer, servers, http, options)
        except BaseException as exc:  # a bug in the harness: record what was scored, then surface it
            _finish(run, "failed", f"{type(exc).__name__}: {exc}")
            raise
    positions = _finish(run, status, error)
    if status != "complete":
        raise RunAborted(f"agreement run {status} after {positions} scored positions ({error}); "
                         f"what was scored is in {run.path}")
    return run


def _execute(run: RunDir, workload: GSM8KWorkload, tokenizer: Tokenizer, servers: dict[str, Server],
             http: httpx.Client, options: AgreeOptions) -> tuple[str, str | None]:
    """Build the sequences, score them on both servers; (status, error) of how it ended."""
    try:
        generate = lambda ids, n: servers["reference"].greedy(http, ids, n)  # noqa: E731
        sequences = build_sequences(workload, tokenizer, options.source, generate, options.max_new_tokens)
        (run.path / SEQUENCES).write_text("".join(s.to_json() + "\n" for s in sequences), encoding="utf-8")
        _score_all(run, sequences, servers, http, options.top_k)
    except KeyboardInterrupt:
        return "interrupted", "stopped by Ctrl-C"
    except ServerUnreachable as exc:
        return "interrupted", str(exc)
    except (ServerHTTPError, MalformedStream, CannotScore) as exc:
        return "failed", str(exc)
    return "complete", None


def _finish(run: RunDir, status: str, error: str | None) -> int:
    """Write the tables of whatever was scored and close the manifest; return the positions scored."""
    positions = write_tables(run.path)
    run.finish(status, error=error, positions_scored=positions)
    return positions


def _check_can_score(servers: dict[str, Server], http: httpx.Client, tokenizer: Tokenizer, k: int) -> None:
    """Score one short sequence on each server before any run directory exists: a server that cannot
    return top-k log-probabilities of given tokens is refused here, with one line."""
    probe = tokenizer.prompt_ids(PROBE_TEXT)
    for role in ROLES:
        servers[role].score(http, probe, 1, k)


def load_scores(run_dir: Path) -> dict[str, dict[str, ScoredTokens]]:
    """{role: {prompt_id: ScoredTokens}} from scores.jsonl; a torn last line (crash mid-write) is skipped."""
    scores: dict[str, dict[str, ScoredTokens]] = {role: {} for role in ROLES}
    path = Path(run_dir) / SCORES
    lines = path.read_text(encoding="utf-8").splitlines() if path.exists() else []
    for number, line in enumerate(lines, 1):
        try:
            row = json.loads(line)
        except json.JSONDecodeError as exc:
            if number == len(lines):
                break
            raise SparkbenchError(f"{path}: line {number} is not JSON; the file is corrupt") from exc
        scores[row["role"]][row["prompt_id"]] = ScoredTokens(row["target_logprobs"], row["top_ids"], row["top_logprobs"])
    return scores


def write_tables(run_dir: Path) -> int:
    """Derive and write every table from sequences.jsonl and scores.jsonl; return the positions scored."""
    run_dir = Path(run_dir)
    if not (run_dir / SEQUENCES).exists():
        return 0
    scores = load_scores(run_dir)
    positions = positions_table(load_sequences(run_dir / SEQUENCES), scores["reference"], scores["candidate"])
    if positions.empty:
        return 0
    positions.to_parquet(run_dir / POSITIONS, index=False)
    tables = {"summary": summary_table(positions), "bands": bands_table(positions),
              "shifts": shifts_table(positions), "by_margin": agreement_by_margin(positions)}
    for name, frame in tables.items():
        frame.to_csv(run_dir / TABLES[name], index=False)
    return len(positions)
