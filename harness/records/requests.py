"""Per-request records: the one long-form source of truth of a run.

While a run is going each finished request is appended to `requests.jsonl` and flushed to disk at
once, so a crash loses only the requests in flight. At the end the same rows are written as
`requests.parquet`. Every later stage (metrics, tables, plots) reads these rows and nothing else.
"""

from __future__ import annotations

import json
import math
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pandas as pd

from harness.engines.base import ASSUMED_ONE_PER_CHUNK, StreamResult
from harness.engines.registry import meta_reader
from harness.errors import SparkbenchError
from harness.records.atomic import write_atomically
from harness.records.checks import checked_records
from harness.records.manifest import LEGACY_BACKEND
from harness.secrets import redact
from harness.spec import Prompt, SamplingParams

JSONL_NAME = "requests.jsonl"
PARQUET_NAME = "requests.parquet"


@dataclass
class RequestRecord:
    """One measured request. Times are perf_counter ns of the client process; *_json are raw."""

    run_id: str
    seq: int  # order in which the runner issued it
    prompt_id: str
    workload: str
    engine: str  # the server's engine (its adapter reads meta_info_json)
    api: str  # the protocol the client spoke to it
    prompt_tokens: int | None
    completion_tokens: int | None
    cached_tokens: int | None
    finish_reason: str | None
    stream_mode: str
    sent_unix_s: float
    sent_ns: int
    first_token_ns: int | None
    last_token_ns: int | None
    end_ns: int
    chunk_ns: list[int] = field(default_factory=list)
    chunk_tokens: list[int] = field(default_factory=list)
    prompt_text: str | None = None
    output_text: str = ""
    output_ids: list[int] = field(default_factory=list)
    # The client loop's stalls while the request ran: when the loop woke late and by how much, ns
    # (`harness.engines.stalls`); None where no probe ran (an older run, an embedded check).
    stall_ns: list[int] | None = None
    stall_late_ns: list[int] | None = None
    # A reasoning parser's thinking, streamed apart from output_text (harness.records.reasoning);
    # each chunk that brought output text: its arrival and the length of output_text after it.
    reasoning_text: str = ""
    text_ns: list[int] = field(default_factory=list)
    text_chars: list[int] = field(default_factory=list)
    sampling_json: str = "{}"
    item_json: str = "{}"
    meta_info_json: str = "{}"
    # ok, or error with what went wrong (ERROR_KINDS) and the one-line reason. A failed request
    # keeps whatever times and tokens it had; metrics use ok requests only.
    status: str = "ok"
    error_kind: str | None = None
    error_message: str | None = None
    # Open loop: when the request was due by the arrival schedule (perf_counter ns; None in a closed
    # loop), and its time window: warmup, measured or cooldown (None: measured).
    scheduled_ns: int | None = None
    window: str | None = None

    @classmethod
    def build(
        cls, *, run_id: str, seq: int, workload: str, engine: str, api: str, prompt: Prompt,
        result: StreamResult, window: str | None = None,
    ) -> RequestRecord:
        return cls(
            run_id=run_id,
            seq=seq,
            prompt_id=prompt.prompt_id,
            workload=workload,
            engine=engine,
            api=api,
            prompt_tokens=stored_count(result.prompt_tokens),
            completion_tokens=stored_count(result.completion_tokens),
            cached_tokens=stored_count(result.cached_tokens),
            finish_reason=result.finish_reason,
            stream_mode=result.stream_mode,
            sent_unix_s=result.sent_unix_s,
            sent_ns=result.sent_ns,
            first_token_ns=result.first_token_ns,
            last_token_ns=result.last_token_ns,
            end_ns=result.end_ns,
            **stored_chunks(result.chunk_ns, result.chunk_tokens),
            prompt_text=prompt.text,
            output_text=result.text,
            output_ids=result.output_ids,
            stall_ns=result.stall_ns,
            stall_late_ns=result.stall_late_ns,
            reasoning_text=result.reasoning_text,
            text_ns=result.text_ns,
            text_chars=result.text_chars,
            sampling_json=json.dumps(prompt.sampling.to_dict(), sort_keys=True),
            item_json=json.dumps(prompt.item, sort_keys=True),
            meta_info_json=json.dumps(result.meta, sort_keys=True),
            scheduled_ns=result.scheduled_ns,
            window=window,
            **outcome(result, prompt.sampling, engine),
        )


MAX_STORED_COUNT = 2**63 - 1  # the typed columns are 64-bit integers


def stored_count(count: Any) -> int | None:
    """A server's count as the typed column can hold it: a whole number from 0 to MAX_STORED_COUNT,
    else None. A count outside that is a lie the record judged (`impossible_count`) and quotes in
    its error message, so what the harness writes it can always read back."""
    if not _whole_number(count):
        return None
    return int(count) if 0 <= count <= MAX_STORED_COUNT else None


def stored_chunks(chunk_ns: list[int], chunk_tokens: list[Any]) -> dict[str, list[int]]:
    """The chunk stamps and running counts up to the first count the typed column cannot hold."""
    counts = [stored_count(count) for count in chunk_tokens]
    kept = next((index for index, count in enumerate(counts) if count is None), len(counts))
    return {"chunk_ns": chunk_ns[:kept], "chunk_tokens": counts[:kept]}


def outcome(result: StreamResult, sampling: SamplingParams, engine: str | None = None) -> dict[str, Any]:
    """`status`, `error_kind`, `error_message` of a finished request.

    Besides the client's own failures, a stream that ended normally is an error when its counts
    cannot be true (`impossible_count`), when the server aborted it, sent no token, or (with
    ignore_eos) sent fewer tokens than the fixed length asked for: its figures would describe a
    different request than the one asked. `engine`: whose meta object the result holds, for the
    speculative counts (None: not checked).
    """
    kind, message = result.error_kind, result.error_message
    tokens = result.completion_tokens
    impossible = impossible_count(result, sampling) or contradicted_drafts(result, engine)
    if impossible:
        kind, message = "impossible_count", impossible  # whatever else went wrong: these counts are lies
    elif kind is None and result.finish_reason == "abort":
        kind, message = "aborted", "the server aborted the request"
    elif kind is None and not tokens:
        kind, message = "no_tokens", "the server sent no token"
    elif kind is None and sampling.ignore_eos and tokens < sampling.max_new_tokens:
        kind, message = "short_output", f"{tokens} of the {sampling.max_new_tokens} tokens asked for (ignore_eos)"
    return {"status": "ok" if kind is None else "error", "error_kind": kind, "error_message": message}


def impossible_count(result: StreamResult, sampling: SamplingParams) -> str | None:
    """Why the server's token counts cannot be true, or None: a count below zero or past 64 bits,
    more generated tokens than asked for, or more than bytes received (every token arrives in at
    least one byte). The metrics spread each chunk over its tokens, so a count believed unchecked
    could cost any amount of memory. Then the counts that contradict each other
    (`contradicted_counts`)."""
    counts = (result.completion_tokens, result.prompt_tokens, result.cached_tokens)
    if not all(count is None or _whole_number(count) for count in (*counts, *result.chunk_tokens)):
        return f"the server reported a token count that is not a whole number {counts}"
    if any(count is not None and count < 0 for count in counts):
        return f"the server reported a negative token count {counts}"
    if any(count is not None and count > MAX_STORED_COUNT for count in counts):
        return f"the server reported a token count past 64 bits {counts}"
    claimed = max(result.completion_tokens or 0, result.tokens_so_far)
    if claimed > sampling.max_new_tokens:
        return f"the server claims {claimed} tokens, more than the {sampling.max_new_tokens} asked for"
    if claimed > result.received_bytes:
        return f"the server claims {claimed} tokens in {result.received_bytes} bytes received"
    return contradicted_counts(result)


def contradicted_counts(result: StreamResult) -> str | None:
    """Why two of the server's counts contradict each other, or None: more cached prompt tokens
    than prompt tokens (a prefix-cache hit rate above 1), or a final completion count below the
    running count the stream already reached (where the running count is the server's own, not
    assumed one per chunk)."""
    prompt, cached, completion = result.prompt_tokens, result.cached_tokens, result.completion_tokens
    if cached is not None and prompt is not None and cached > prompt:
        return f"the server reports {cached} cached tokens of {prompt} prompt tokens"
    counted = result.meta.get("chunk_token_counts") != ASSUMED_ONE_PER_CHUNK
    if completion is not None and counted and completion < result.tokens_so_far:
        return f"the server's final count of {completion} completion tokens is below the {result.tokens_so_far} it streamed"
    return None


def contradicted_drafts(result: StreamResult, engine: str | None) -> str | None:
    """Why the speculative counts of `engine`'s meta object contradict each other, or None: more
    draft tokens accepted than drafted (an accept rate above 1)."""
    if engine is None:
        return None
    completion = math.nan if result.completion_tokens is None else float(result.completion_tokens)
    spec = meta_reader(engine).speculation(result.meta, completion)
    accepted, drafted = spec["accepted_draft_tokens"], spec["proposed_draft_tokens"]
    if accepted > drafted:  # NaN (not reported) compares false
        return f"the server reports {accepted:g} accepted draft tokens of {drafted:g} drafted"
    return None


def _whole_number(count: Any) -> bool:
    if isinstance(count, bool) or not isinstance(count, (int, float)):
        return False
    return isinstance(count, int) or (math.isfinite(count) and count.is_integer())


COLUMNS = list(RequestRecord.__dataclass_fields__)
NULLABLE_INT_COLUMNS = ("prompt_tokens", "completion_tokens", "cached_tokens", "first_token_ns", "last_token_ns",
                        "scheduled_ns")


class RecordWriter:
    """Appends records to the run's JSONL file, durably, one whole line per finished request.

    The file only ever grows by whole lines: a torn line left by a process killed mid-write is cut
    off before the first append (a resumed run would otherwise glue its first record to it), and
    a write that fails (disk full) is taken back before the error goes on.
    """

    def __init__(self, run_dir: Path) -> None:
        self.path = run_dir / JSONL_NAME
        self._fd = os.open(self.path, os.O_WRONLY | os.O_CREAT, 0o644)
        self._end = _whole_lines_end(self.path)
        os.ftruncate(self._fd, self._end)
        self.count = 0  # this process's records
        self.earlier = _lines_before(self.path, self._end)  # a resumed run's records from before

    @property
    def total(self) -> int:
        """Every record in the file: what a resumed run's manifest says it recorded."""
        return self.earlier + self.count

    def append(self, record: RequestRecord) -> None:
        line = (json.dumps(written_fields(record)) + "\n").encode("utf-8")
        try:
            written = 0
            while written < len(line):
                written += write_at(self._fd, line[written:], self._end + written)
            os.fsync(self._fd)
        except OSError:
            os.ftruncate(self._fd, self._end)  # never leave half a record behind
            raise
        self._end += len(line)
        self.count += 1

    def close(self) -> None:
        os.close(self._fd)


def written_fields(record: RequestRecord) -> dict[str, Any]:
    """The record's fields as its line holds them: every text redacted (`harness.secrets.redact`: a
    server may echo a credential in its answer, its meta object or an error), numbers and id lists
    as they are. Field by field, on every finished request: redacting the whole line would scan
    the thousands of digits of its chunk stamps, and `dataclasses.asdict` would copy every list;
    a text is redacted before JSON escapes it, so a secret with a quote or a non-ASCII letter is
    found as it was given."""
    fields = {name: getattr(record, name) for name in COLUMNS}
    return {name: redact(value) if isinstance(value, str) else value for name, value in fields.items()}


def write_at(fd: int, data: bytes, offset: int) -> int:
    """`os.pwrite`: the bytes written of `data` at `offset` (the one place records reach the disk)."""
    return os.pwrite(fd, data, offset)


def _lines_before(path: Path, end: int) -> int:
    """How many whole lines `path` holds before byte `end`."""
    with path.open("rb") as file:
        return sum(block.count(b"\n") for block in iter(lambda: file.read(min(1 << 20, end - file.tell())), b""))


def _whole_lines_end(path: Path) -> int:
    """The size of `path` up to and including its last newline (0 when it has none)."""
    with path.open("rb") as file:
        size = file.seek(0, os.SEEK_END)
        block = 1 << 16
        while size > 0:
            start = max(0, size - block)
            file.seek(start)
            newline = file.read(size - start).rfind(b"\n")
            if newline >= 0:
                return start + newline + 1
            size = start
    return 0


def json_lines(path: Path) -> list[dict[str, Any]]:
    """The objects of a JSON-lines file. A torn last line (crash mid-write) is dropped, anything
    else fails."""
    rows: list[dict[str, Any]] = []
    try:
        lines = path.read_text(encoding="utf-8").splitlines()
    except UnicodeDecodeError as exc:
        raise SparkbenchError(f"{path}: not UTF-8 text (byte {exc.start}); the file is corrupt") from exc
    for number, line in enumerate(lines, start=1):
        try:
            row = json.loads(line)
        except json.JSONDecodeError as exc:
            if number == len(lines):
                break  # the write in flight when the process died
            raise SparkbenchError(f"{path}: line {number} is not valid JSON; the file is corrupt") from exc
        if not isinstance(row, dict):
            raise SparkbenchError(f"{path}: line {number} is not a JSON object; the file is corrupt")
        rows.append(row)
    return rows


def read_jsonl(path: Path) -> pd.DataFrame:
    """Rows of a JSONL record file (`json_lines`), one per prompt (`latest_attempts`)."""
    frame = pd.DataFrame(json_lines(path))
    frame = latest_attempts(checked_records(with_later_fields(with_status(with_engine_and_api(frame))), path))
    frame = frame.reindex(columns=COLUMNS)
    # Nullable integers: a single missing value must not turn nanosecond stamps into rounded floats.
    for column in NULLABLE_INT_COLUMNS:
        frame[column] = frame[column].astype("Int64")
    return frame


def with_engine_and_api(frame: pd.DataFrame) -> pd.DataFrame:
    """The table with `engine` and `api` columns; an old table's `backend` is translated
    (LEGACY_BACKEND) and dropped."""
    if "backend" not in frame.columns:
        return frame
    pairs = [LEGACY_BACKEND.get(name, (name, name)) for name in frame["backend"]]
    return frame.drop(columns="backend").assign(engine=[engine for engine, _ in pairs],
                                                api=[api for _, api in pairs])


LATER_FIELDS = {"reasoning_text": "", "text_ns": [], "text_chars": [], "stall_ns": None, "stall_late_ns": None}


def with_later_fields(frame: pd.DataFrame) -> pd.DataFrame:
    """The table with the record fields added after its run was written (LATER_FIELDS), at their
    defaults: a run recorded before reasoning streams were read had none; one recorded before the
    client's stalls were probed has them as not measured (None)."""
    missing = {name: [list(value) if isinstance(value, list) else value for _ in range(len(frame))]
               for name, value in LATER_FIELDS.items() if name not in frame.columns}
    return frame.assign(**missing) if missing else frame


def with_status(frame: pd.DataFrame) -> pd.DataFrame:
    """The table with `status`; records written before failed requests were recorded are all ok."""
    if "status" in frame.columns:
        return frame
    return frame.assign(status="ok", error_kind=None, error_message=None)


def latest_attempts(frame: pd.DataFrame) -> pd.DataFrame:
    """One row per prompt: a resumed run appends a new attempt of each prompt that had no ok record,
    so the last record of a prompt is its outcome (earlier attempts stay in the JSONL, for audit).
    A request can therefore never count twice."""
    if frame.empty or "prompt_id" not in frame.columns:
        return frame
    return frame.drop_duplicates(subset="prompt_id", keep="last").sort_values("seq", kind="stable",
                                                                               ignore_index=True)


def write_parquet(run_dir: Path) -> Path:
    """Write the JSONL records of a run as Parquet (one row per request) and return its path.
    Written under a temporary name and renamed: a reader never finds half a table, and a write
    that fails (disk full) leaves the JSONL the only table, and frees what it took."""
    frame = read_jsonl(run_dir / JSONL_NAME)
    return write_atomically(run_dir / PARQUET_NAME, lambda partial: frame.to_parquet(partial, index=False))


def load_requests(run_dir: Path) -> pd.DataFrame:
    """The per-request table of a run: Parquet when the run finished writing it, else the JSONL
    (also when a Parquet file is there but damaged: the JSONL holds the same records)."""
    parquet, jsonl = run_dir / PARQUET_NAME, run_dir / JSONL_NAME
    if parquet.exists():
        try:
            frame = with_later_fields(with_status(with_engine_and_api(pd.read_parquet(parquet))))
        except Exception as exc:  # pyarrow raises several unrelated types for a damaged file
            if not jsonl.exists():
                raise SparkbenchError(f"{parquet}: cannot be read as Parquet ({type(exc).__name__}) "
                                      f"and there is no {JSONL_NAME} beside it") from exc
        else:
            return checked_records(frame, parquet)
    if jsonl.exists():
        return read_jsonl(jsonl)
    raise SparkbenchError(f"{run_dir}: no {PARQUET_NAME} or {JSONL_NAME}; is this a run directory?")
