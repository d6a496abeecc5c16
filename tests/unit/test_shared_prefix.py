"""The shared-prefix workload: G groups of M prompts that share exactly their group's P tokens,
with nothing shared across groups or with the warm-up; a trace's groups and lengths as it gives them."""

from __future__ import annotations

import numpy as np
import pytest

from harness.errors import SparkbenchError
from harness.run.trace import Trace
from workloads.registry import NamedWorkload, config_of
from workloads.shared_prefix import SharedPrefixWorkload
from workloads.vocab import Vocabulary

VOCAB = Vocabulary(size=400, special_ids=frozenset({0, 1}))


def workload(**kw) -> SharedPrefixWorkload:
    base = dict(vocabulary=VOCAB, num_groups=3, prompts_per_group=4, prefix_tokens=24, question_tokens=6,
                output_tokens=5, seed=2, salt=9)
    return SharedPrefixWorkload(**{**base, **kw})


def shared(a: tuple[int, ...], b: tuple[int, ...]) -> int:
    return next((i for i, (x, y) in enumerate(zip(a, b)) if x != y), min(len(a), len(b)))


def test_prompts_of_a_group_share_exactly_its_prefix_and_no_more():
    prompts = workload().prompts()
    assert len(prompts) == 12 and all(len(p.input_ids) == 30 for p in prompts)
    for a in prompts:
        for b in prompts:
            if a is not b:
                same = a.item["prefix_group"] == b.item["prefix_group"]
                assert shared(a.input_ids, b.input_ids) == (24 if same else 0)
    for warm in workload().warmup_prompts(3):
        assert all(shared(warm.input_ids, p.input_ids) == 0 for p in prompts)
    assert {p.sampling.max_new_tokens for p in prompts} == {5}


def test_prompts_past_the_measured_ones_are_further_members_of_the_same_groups():
    work = workload()
    measured, more = work.prompts(), work.more_prompts(7)
    assert len({p.input_ids for p in measured + more}) == 19  # none sent twice (it would be all cache)
    for extra in more:
        for p in measured:
            same = extra.item["prefix_group"] == p.item["prefix_group"]
            assert shared(extra.input_ids, p.input_ids) == (24 if same else 0)


def test_the_order_is_a_seeded_shuffle_and_the_spec_asks_for_the_cache():
    order = [p.prompt_id for p in workload().prompts()]
    assert order == [p.prompt_id for p in workload().prompts()]
    assert order != sorted(order) and order != [p.prompt_id for p in workload(seed=3).prompts()]
    spec = workload().spec()
    assert spec["requires_uncached_prompts"] is False  # the guard's "no prompt from cache" rule is not its
    assert (spec["num_groups"], spec["prompts_per_group"], spec["prefix_tokens"]) == (3, 4, 24)


def test_a_trace_gives_each_request_its_group_and_lengths():
    trace = Trace(np.array([0.0, 0.1, 0.2, 0.3]), {"prefix_group": ("a", "b", "a", "a"),
                                                     "input_tokens": (30, 40, 26, 50),
                                                     "output_tokens": (3, 4, 5, 6)}, "digest")
    prompts = workload().replaying(trace).prompts()
    assert [len(p.input_ids) for p in prompts] == [30, 40, 26, 50]
    assert [p.sampling.max_new_tokens for p in prompts] == [3, 4, 5, 6]
    assert [p.item["prefix_group"] for p in prompts] == [0, 1, 0, 0]
    assert shared(prompts[0].input_ids, prompts[3].input_ids) == 24 and shared(prompts[0].input_ids,
                                                                               prompts[1].input_ids) == 0
    assert workload().replaying(trace).spec()["trace_sha256"] == "digest"
    short = Trace(np.array([0.0]), {"input_tokens": (24,)})
    with pytest.raises(SparkbenchError, match="request 0: input_tokens 24 leaves no question after the 24-token"):
        workload().replaying(short).prompts()


def test_a_prompt_past_the_context_is_named():
    with pytest.raises(SparkbenchError, match=r"prompt gsp-\d-\d: 30 prompt tokens \+ 5 new tokens"):
        workload().check_fits(34)
    workload().check_fits(35)


def test_configs_name_it_with_its_options_and_defaults_by_scale():
    reduced = config_of("shared-prefix", {"num_groups": 2}).at_scale(reduced=True)
    assert (reduced.num_groups, reduced.prompts_per_group, reduced.prefix_tokens) == (2, 4, 512)
    published = config_of("shared-prefix", {}).at_scale(reduced=False)  # SGLang bench_serving's defaults
    assert (published.num_groups, published.prompts_per_group, published.prefix_tokens,
            published.question_tokens, published.output_tokens) == (64, 16, 2048, 128, 256)
    with pytest.raises(SparkbenchError, match="prefix_tokens"):
        NamedWorkload(name="shared-prefix", options={"prefix_tokens": 0})
