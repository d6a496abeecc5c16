"""The synthetic workload: exact lengths, no shared prefixes, seeded reproducibility."""

from __future__ import annotations

import json

from workloads.synthetic import SyntheticWorkload
from workloads.vocab import Vocabulary, load_vocabulary

VOCAB = Vocabulary(size=300, special_ids=frozenset({0, 1, 2}))


def _workload(**kw) -> SyntheticWorkload:
    base = dict(vocabulary=VOCAB, num_prompts=20, input_tokens=64, output_tokens=16, seed=3, salt=11)
    return SyntheticWorkload(**{**base, **kw})


def test_exact_lengths_and_greedy_fixed_output():
    for prompt in _workload().prompts():
        assert len(prompt.input_ids) == 64
        s = prompt.sampling
        assert (s.max_new_tokens, s.temperature, s.ignore_eos) == (16, 0.0, True)


def test_special_tokens_never_appear():
    ids = {i for p in _workload().prompts() + _workload().warmup_prompts(5) for i in p.input_ids}
    assert not ids & VOCAB.special_ids
    assert max(ids) < VOCAB.size


def test_first_tokens_are_distinct_across_measured_and_warmup_prompts():
    work = _workload()
    firsts = [p.input_ids[0] for p in work.prompts() + work.warmup_prompts(7)]
    assert len(set(firsts)) == len(firsts) == 27


def test_same_seed_and_salt_give_identical_prompts():
    assert _workload().prompts() == _workload().prompts()


def test_salt_changes_only_the_first_token():
    a, b = _workload(salt=1).prompts(), _workload(salt=2).prompts()
    assert [p.input_ids[1:] for p in a] == [p.input_ids[1:] for p in b]
    assert [p.input_ids[0] for p in a] != [p.input_ids[0] for p in b]


def test_spec_records_what_regenerates_the_prompts():
    spec = _workload().spec()
    assert {spec[k] for k in ("seed", "salt", "input_tokens", "output_tokens")} == {3, 11, 64, 16}
    assert spec["requires_uncached_prompts"] is True


def test_vocabulary_reads_added_tokens_as_special(tmp_path):
    from tokenizers import Tokenizer, models

    tokenizer = Tokenizer(models.WordLevel({"a": 0, "b": 1, "<s>": 2}, unk_token="a"))
    tokenizer.add_special_tokens(["<s>"])
    tokenizer.save(str(tmp_path / "tokenizer.json"))
    vocab = load_vocabulary(tmp_path)
    assert vocab.size == 3 and vocab.special_ids == frozenset({2})
    assert json.loads((tmp_path / "tokenizer.json").read_text())["added_tokens"][0]["content"] == "<s>"
