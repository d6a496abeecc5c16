"""Length mixes of the synthetic workload: each distribution draws what it says, seeded, clipped,
recorded per request; a bad spec is one line before any server is asked."""

from __future__ import annotations

import json

import numpy as np
import pytest

from harness.errors import SparkbenchError
from workloads import MAX_CONTEXT_TOKENS
from workloads.lengths import draw_lengths, parse_length_dist
from workloads.registry import NamedWorkload, config_of
from workloads.synthetic import SyntheticWorkload
from workloads.vocab import Vocabulary

VOCAB = Vocabulary(size=300, special_ids=frozenset({0, 1, 2}))
DRAWS = 20_000


def draw(spec: str, count: int = DRAWS, seed: int = 5, least: int = 1) -> np.ndarray:
    return np.array(draw_lengths(parse_length_dist(spec, "output_tokens"), count, [seed, 2], least))


def test_each_kind_draws_the_lengths_it_names():
    assert set(draw("fixed:128", 50)) == {128}
    uniform = draw("uniform:1000,3000")
    assert (uniform.min(), uniform.max()) == (1000, 3000)  # both ends included
    assert uniform.mean() == pytest.approx(2000, rel=0.01)
    normal = draw("normal:500,50")
    assert (normal.mean(), normal.std()) == (pytest.approx(500, rel=0.01), pytest.approx(50, rel=0.05))
    lognormal = draw("lognormal:400,300")  # the mean and sd of the lengths, not of their log
    assert (lognormal.mean(), lognormal.std()) == (pytest.approx(400, rel=0.03), pytest.approx(300, rel=0.1))
    assert np.median(lognormal) < lognormal.mean()  # skewed right, as prompt logs are


def test_an_empirical_mix_draws_only_the_files_lengths(tmp_path):
    rows = [{"output_tokens": n, "prompt": "x"} for n in (16, 16, 16, 300)]
    path = tmp_path / "lengths.jsonl"
    path.write_text("".join(json.dumps(row) + "\n" for row in rows), encoding="utf-8")
    drawn = draw(f"empirical:{path}")
    assert set(drawn) == {16, 300}
    assert (drawn == 16).mean() == pytest.approx(0.75, abs=0.02)  # with replacement, in the file's proportions
    (tmp_path / "other.csv").write_text("n\n7\n9\n", encoding="utf-8")
    assert set(draw(f"empirical:{tmp_path / 'other.csv'}#n", 200)) == {7, 9}


def test_the_same_seed_draws_the_same_lengths_and_draws_are_clipped():
    assert draw("normal:100,40").tolist() == draw("normal:100,40").tolist()
    assert draw("normal:100,40").tolist() != draw("normal:100,40", seed=6).tolist()
    clipped = draw("normal:3,50", least=2)
    assert clipped.min() == 2 and (clipped == 2).mean() > 0.4  # never a length below the least
    assert draw(f"fixed:{MAX_CONTEXT_TOKENS * 4}", 3).tolist() == [MAX_CONTEXT_TOKENS] * 3


@pytest.mark.parametrize("options, message", [
    ({"input_len_dist": "zipf:2"}, "the kind is one of fixed, uniform, normal, lognormal, empirical"),
    ({"input_len_dist": "uniform:3000,1000"}, "the minimum is larger than the maximum"),
    ({"input_len_dist": "normal:500"}, "normal takes 2 finite number"),
    ({"output_len_dist": "uniform:a,b"}, "uniform takes 2 number"),
    ({"output_len_dist": "empirical:/no/such/file.jsonl"}, "is not a file"),
    ({"input_len_dist": "fixed:10", "input_tokens": 10}, "give input_tokens or input_len_dist, not both"),
])
def test_a_bad_length_spec_is_refused_when_the_options_are_read(options, message):
    with pytest.raises(SparkbenchError, match=message) as caught:
        config_of("synthetic", options)
    assert "\n" not in str(caught.value).strip()
    with pytest.raises(SparkbenchError, match=message):  # a nightly or sweep config names it the same way
        NamedWorkload(name="synthetic", options=options)


def test_an_empirical_file_row_that_is_no_length_is_named(tmp_path):
    path = tmp_path / "lengths.csv"
    path.write_text("output_tokens\n12\nlots\n", encoding="utf-8")
    with pytest.raises(SparkbenchError, match="row 1: output_tokens is 'lots', not a whole number"):
        draw(f"empirical:{path}", 5)


def test_a_drawn_length_takes_no_scale_default_and_the_spec_names_the_mix():
    config = config_of("synthetic", {"input_len_dist": "uniform:20,40"}).at_scale(reduced=True)
    assert config.input_tokens is None and config.output_tokens == 256
    assert config.input_len_dist == "uniform:20,40"


def mixed(**kw) -> SyntheticWorkload:
    dists = {"input_tokens": parse_length_dist("uniform:20,60", "input_tokens"),
             "output_tokens": parse_length_dist("lognormal:8,4", "output_tokens")}
    return SyntheticWorkload(**{"vocabulary": VOCAB, "num_prompts": 12, "seed": 3, "salt": 11, "dists": dists, **kw})


def test_each_prompt_has_its_drawn_lengths_recorded_in_its_item():
    prompts = mixed().prompts()
    inputs = [len(p.input_ids) for p in prompts]
    assert inputs == [p.item["input_tokens"] for p in prompts] and len(set(inputs)) > 3
    assert [p.sampling.max_new_tokens for p in prompts] == [p.item["output_tokens"] for p in prompts]
    assert all(20 <= n <= 60 for n in inputs)
    firsts = [p.input_ids[0] for p in prompts + mixed().warmup_prompts(4)]
    assert len(set(firsts)) == len(firsts)  # still no shared prefix: the prefill is measured in full
    spec = mixed().spec()
    assert (spec["input_tokens"], spec["output_tokens"]) == (None, None)
    assert (spec["input_len_dist"], spec["output_len_dist"]) == ("uniform:20,60", "lognormal:8,4")
    assert spec["sampling"]["max_new_tokens"] == max(p.sampling.max_new_tokens for p in prompts)
    assert spec["requires_uncached_prompts"] is True


def test_prompts_past_the_measured_ones_continue_the_same_draw():
    longer = mixed(num_prompts=20).prompts()
    work = mixed()
    assert [len(p.input_ids) for p in work.prompts() + work.more_prompts(8)] == [len(p.input_ids) for p in longer]


def test_a_drawn_prompt_past_the_context_is_named_before_any_request():
    with pytest.raises(SparkbenchError, match=r"prompt syn-\d+ \(input_tokens uniform:20,60, output_tokens "
                                              r"lognormal:8,4\): \d+ prompt tokens"):
        mixed().check_fits(40)
    mixed().check_fits(200)
