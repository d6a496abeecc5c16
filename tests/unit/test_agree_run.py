"""An agreement run end to end against fake SGLang and vLLM servers (httpx.MockTransport)."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys

import httpx
import pandas as pd
import pytest

from harness.agree.report import headline, write_report
from harness.agree.run import AgreeOptions, run_agreement, write_tables
from harness.engines.scoring import CannotScore
from harness.errors import SparkbenchError
from harness.records.manifest import RunRecord
from harness.records.rundir import load_record
from harness.run.runner import RunAborted
from tests.unit.agree_fakes import FakeSGLang, FakeVLLM, Hosts, write_tokenizer

pytestmark = pytest.mark.cli  # runs the command line in subprocesses: left out of `make test-quick`

URLS = {"reference": "http://ref", "candidate": "http://cand"}
TRICKLE_GAP_S = 0.2


@pytest.fixture(scope="module")
def tokenizer_dir(tmp_path_factory):
    return write_tokenizer(tmp_path_factory.mktemp("tok"))


def agree(tmp_path, tokenizer_dir, reference, candidate, **options):
    settings = {"limit": 3, "tokenizer": tokenizer_dir, **options}
    transport = httpx.MockTransport(Hosts({"ref": reference, "cand": candidate}))
    return run_agreement(URLS, AgreeOptions(**settings), tmp_path, transport=transport)


def summary(run_dir) -> pd.Series:
    return pd.read_csv(run_dir / "summary.csv").set_index(["metric", "stat"])["value"]


def test_same_model_agrees_everywhere(tmp_path, tokenizer_dir):
    run = agree(tmp_path, tokenizer_dir, FakeSGLang(), FakeSGLang(), source="greedy", max_new_tokens=6)
    s = summary(run.path)
    assert s[("positions", "value")] == 18 and s[("top1_agreement", "mean")] == 1.0
    assert s[("kl_union_nats", "max")] == 0.0 and s[("abs_target_logprob_shift", "max")] == 0.0
    positions = pd.read_parquet(run.path / "positions.parquet")
    assert (positions["target_id"] == positions["ref_top1_id"]).all()  # greedy: the forced token is the top-1
    assert run.manifest["status"] == "complete" and run.manifest["kind"] == "agreement"


def test_an_agreement_run_writes_only_keys_its_record_declares(tmp_path, tokenizer_dir):
    run = agree(tmp_path, tokenizer_dir, FakeSGLang(), FakeSGLang(), limit=1)
    assert set(run.manifest) - set(RunRecord.model_fields) == set()
    record = load_record(run.path)
    assert record.agreement.source == "answers" and set(record.servers) == {"reference", "candidate"}


def test_perturbed_candidate_disagrees_and_more_noise_disagrees_more(tmp_path, tokenizer_dir):
    agreement = []
    for noise in (0.3, 3.0):
        run = agree(tmp_path / str(noise), tokenizer_dir, FakeSGLang(), FakeVLLM(noise=noise), limit=4)
        agreement.append(summary(run.path)[("top1_agreement", "mean")])
    assert 1.0 > agreement[0] > agreement[1]


def test_both_engines_receive_the_same_token_ids(tmp_path, tokenizer_dir):
    reference, candidate = FakeSGLang(), FakeVLLM()
    run = agree(tmp_path, tokenizer_dir, reference, candidate, limit=2, top_k=5)
    sent_ref = [b["input_ids"] for b in reference.bodies if b.get("return_logprob")][1:]  # [0] is the probe
    sent_cand = [b["prompt"] for b in candidate.bodies][1:]
    assert sent_ref == sent_cand and len(sent_ref) == 2
    sequences = [json.loads(line) for line in (run.path / "sequences.jsonl").read_text().splitlines()]
    assert [s["prompt_ids"] + s["continuation_ids"] for s in sequences] == sent_ref
    assert all(b["logprob_start_len"] == len(s["prompt_ids"]) - 1
               for b, s in zip([b for b in reference.bodies if b.get("return_logprob")][1:], sequences))
    assert summary(run.path)[("top1_agreement", "mean")] == 1.0  # same fake model behind both APIs


@pytest.mark.parametrize(("candidate", "message"), [
    (FakeVLLM(prompt_logprobs=False), "returned no prompt_logprobs"),
    (FakeVLLM(owner="another-server"), r"\(openai\) cannot return top-k log-probabilities of given tokens"),
], ids=["vllm-without-prompt-logprobs", "generic-openai-server"])
def test_a_server_that_cannot_score_is_refused_before_any_run_directory(tmp_path, tokenizer_dir, candidate, message):
    with pytest.raises(CannotScore, match=message):
        agree(tmp_path, tokenizer_dir, FakeSGLang(), candidate)
    assert list(tmp_path.iterdir()) == []


def test_unknown_source_is_a_one_line_error():
    with pytest.raises(SparkbenchError, match="unknown continuation source"):
        AgreeOptions(source="sampled")


class DiesAfter:
    """A fake that stops answering after `calls` scoring requests."""

    def __init__(self, server, calls: int) -> None:
        self.server, self.calls = server, calls

    def __call__(self, request: httpx.Request) -> httpx.Response:
        if request.url.path == "/generate":
            self.calls -= 1
            if self.calls < 0:
                raise httpx.ConnectError("connection refused")
        return self.server(request)


def test_server_dying_mid_run_keeps_what_was_scored(tmp_path, tokenizer_dir):
    with pytest.raises(RunAborted, match="interrupted after"):
        agree(tmp_path, tokenizer_dir, FakeSGLang(), DiesAfter(FakeSGLang(), calls=3))
    run_dir = next(tmp_path.iterdir())
    manifest = json.loads((run_dir / "manifest.json").read_text())
    assert manifest["status"] == "interrupted" and manifest["positions_scored"] > 0
    assert summary(run_dir)[("sequences", "value")] == 2  # probe + two sequences answered


class TricklesAfter(DiesAfter):
    """A fake whose scoring answers, after `calls` of them, come a byte every TRICKLE_GAP_S, for ever."""

    def __call__(self, request: httpx.Request) -> httpx.Response:
        if request.url.path == "/generate":
            self.calls -= 1
            if self.calls < 0:
                return httpx.Response(200, stream=Trickle())
        return self.server(request)


class Trickle(httpx.AsyncByteStream):
    async def __aiter__(self):
        while True:
            yield b" "
            await asyncio.sleep(TRICKLE_GAP_S)


def test_a_scoring_answer_that_trickles_ends_at_its_deadline(tmp_path, tokenizer_dir):
    """httpx limits each read (never reached here), the run limits the request: it stops at
    request_timeout_s and keeps what was scored. The limit is 3 s, not the least allowed (1 s), so
    that the healthy answers before the trickle meet it on a loaded host too."""
    with pytest.raises(RunAborted, match="no complete answer within 3 s"):
        agree(tmp_path, tokenizer_dir, FakeSGLang(), TricklesAfter(FakeSGLang(), calls=3), request_timeout_s=3.0)
    manifest = json.loads((next(tmp_path.iterdir()) / "manifest.json").read_text())
    assert manifest["status"] == "interrupted" and manifest["positions_scored"] > 0


def test_report_and_headline_from_the_tables(tmp_path, tokenizer_dir):
    run = agree(tmp_path, tokenizer_dir, FakeSGLang(), FakeVLLM(noise=1.0), limit=2)
    html_path, md_path = write_report(run.path)
    assert "Top-k agreement" in html_path.read_text() and (run.path / "plots" / "agreement.png").exists()
    assert "plots/agreement.png" in md_path.read_text()
    assert "top-1 agreement" in headline(run.path)


def test_tables_are_rebuilt_from_records_alone(tmp_path, tokenizer_dir):
    run = agree(tmp_path, tokenizer_dir, FakeSGLang(), FakeVLLM(noise=1.0), limit=2)
    before = pd.read_parquet(run.path / "positions.parquet")
    (run.path / "positions.parquet").unlink()
    with (run.path / "scores.jsonl").open("a") as out:
        out.write('{"role": "reference", "prom')  # a crash mid-write leaves a torn last line
    assert write_tables(run.path) == len(before)
    pd.testing.assert_frame_equal(pd.read_parquet(run.path / "positions.parquet"), before)


def _cli(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "harness.cli", *args], capture_output=True, text=True, timeout=60)


def test_cli_refuses_an_unknown_source_and_an_unreachable_server_in_one_line(tmp_path):
    done = _cli("agree", "--reference", "http://127.0.0.1:9", "--candidate", "http://127.0.0.1:9",
                "--source", "sampled", "--results", str(tmp_path))
    assert done.returncode == 2 and done.stderr.strip().startswith("sparkbench: unknown continuation source")
    done = _cli("agree", "--reference", "http://127.0.0.1:9", "--candidate", "http://127.0.0.1:9",
                "--results", str(tmp_path))
    assert done.returncode == 2 and len(done.stderr.strip().splitlines()) == 1
    assert done.stderr.startswith("sparkbench: cannot reach http://127.0.0.1:9")
    assert list(tmp_path.iterdir()) == []


def test_cli_report_of_an_agreement_run_and_refusal_to_mix(tmp_path, tokenizer_dir):
    run = agree(tmp_path / "agree", tokenizer_dir, FakeSGLang(), FakeVLLM(noise=1.0), limit=2)
    done = _cli("report", str(run.path), "--out", str(tmp_path / "out"))
    assert done.returncode == 0, done.stderr
    assert (tmp_path / "out" / run.path.name / "report.html").exists()
    other = tmp_path / "bench"
    other.mkdir()
    (other / "manifest.json").write_text(json.dumps({"run_id": "bench", "workload": {"name": "synthetic"}}))
    done = _cli("report", str(run.path), str(other), "--out", str(tmp_path / "out2"))
    assert done.returncode == 2 and "have their own report" in done.stderr


class Garbled(FakeSGLang):
    """Answers scoring requests with a top-k list of the wrong shape."""

    def generate(self, body: dict) -> dict:
        answer = super().generate(body)
        if body.get("return_logprob"):
            answer["meta_info"]["input_top_logprobs"] = [None, *[[["x"]]] * (len(answer["meta_info"]["input_top_logprobs"]) - 1)]
        return answer


def test_an_answer_of_another_shape_is_one_line_not_a_traceback(tmp_path, tokenizer_dir):
    with pytest.raises(CannotScore, match="answered in an unexpected shape"):
        agree(tmp_path, tokenizer_dir, Garbled(), FakeSGLang())


def test_the_api_key_goes_to_both_servers_and_into_no_file(tmp_path, tokenizer_dir):
    seen = []

    def keyed(server):
        def answer(request: httpx.Request) -> httpx.Response:
            seen.append(request.headers.get("authorization"))
            return server(request)
        return answer

    transport = httpx.MockTransport(Hosts({"ref": keyed(FakeSGLang()), "cand": keyed(FakeSGLang())}))
    run = run_agreement(URLS, AgreeOptions(limit=1, tokenizer=tokenizer_dir), tmp_path, transport=transport,
                        headers={"Authorization": "Bearer k-agree"})
    assert seen and set(seen) == {"Bearer k-agree"}
    assert not any("k-agree" in path.read_bytes().decode(errors="replace") for path in run.path.iterdir())
