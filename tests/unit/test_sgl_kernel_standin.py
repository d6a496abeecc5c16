"""The pure-torch sgl_kernel stand-in, op by op, on small cases computed by hand.

Each op reproduces an SGLang kernel (named in its docstring); the expected values below follow
that kernel's contract. The ops need torch, which the harness never imports: they run in one
subprocess under a server environment's Python (tests/unit/standin_probe.py), skipped with the
reason when no such environment is installed.
"""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys
from pathlib import Path

import pytest

from harness.errors import SparkbenchError
from harness.run.embedded import STANDIN_DIR
from harness.testbed.envs import env_python

PROBE = Path(__file__).with_name("standin_probe.py")
LN3 = math.log(3.0)
LN2 = math.log(2.0)


def t(values, dtype="int64"):
    return {"tensor": values, "dtype": dtype}


def case(name, op, args, outputs=(), buffers=()):
    return {"name": name, "op": op, "args": args, "outputs": list(outputs), "buffers": list(buffers)}


CACHE_CASES = [
    # Request in pool row 1 gets slots 7, 8 at [0, 2); then row 0 gets 9, 10, 11 at [2, 5).
    case("assign_req_to_token_pool", "sgl_kernel.assign_req_to_token_pool_cpu",
         [t([1, 0]), t([[0] * 6, [0] * 6], "int32"), t([0, 2]), t([2, 5]), t([7, 8, 9, 10, 11]), 6], [1]),
    case("assign_extend_cache_locs", "sgl_kernel.assign_extend_cache_locs_cpu",
         [t([1, 0]), t([[10, 11, 12, 13], [20, 21, 22, 23]], "int32"), t([1, 0]), t([3, 2]), t([0] * 4), 4], [4]),
    case("assign_draft_cache_locs_contiguous", "sgl_kernel.assign_draft_cache_locs_contiguous_cpu",
         [t([0, 1]), t([list(range(10, 16)), list(range(20, 26))], "int32"), t([2, 3]), t([0] * 4), 6, 1, 2], [3]),
    case("build_draft_decode_metadata", "sgl_kernel.build_draft_decode_metadata_cpu",
         [t([list(range(10, 18))], "int32"), t([0]), t([2]), 2, 2, 8]),
    case("fill_accept_out_cache_loc", "sgl_kernel.fill_accept_out_cache_loc_cpu",
         [t([[0, 1, -1], [3, -1, -1]]), t([100, 101, 102, 103, 104, 105]), t([0, 0, 0])], [2]),
    case("fill_bonus_tokens", "sgl_kernel.fill_bonus_tokens_cpu",
         [t([[5, 6, 7], [8, 9, 10]]), t([2, 3], "int32"), t([0, 0]), 3], [2]),
    # Two layer buffers of different dtypes; rows 0 and 2 swap places (a move that overlaps itself).
    case("copy_all_layer_kv_cache", "sgl_kernel.copy_all_layer_kv_cache_cpu",
         [{"data_ptrs": [0, 1]}, {"row_strides": [0, 1]}, t([0, 2]), t([2, 0])],
         buffers=[t([[1, 1], [2, 2], [3, 3]], "int16"), t([[10], [20], [30]], "int32")]),
]

# Request 0: a chain root -> 1 -> 2 -> 3. Request 1: root with children 1 and 2, node 3 under 2.
TREE_LINKS = {"next_token": [[1, 2, 3, -1], [1, -1, 3, -1]], "next_sibling": [[-1, -1, -1, -1], [-1, 2, -1, -1]]}
TREE_MASKS = [[[1, 0, 0, 0], [1, 1, 0, 0], [1, 1, 1, 0], [1, 1, 1, 1]],
              [[1, 0, 0, 0], [1, 1, 0, 0], [1, 0, 1, 0], [1, 0, 1, 1]]]
TREE_CASES = [
    # Chain: targets 5, 6 match drafts 1, 2; draft 3 (7) misses the target 8, which becomes the bonus.
    # Tree: target 6 at the root skips child 1 (5) for its sibling 2 (6), then child 3 (7) matches 7.
    case("verify_tree_greedy", "sgl_kernel.verify_tree_greedy_cpu",
         [t([0] * 8), t([[-1] * 4, [-1] * 4]), t([0, 0], "int32"), t([[9, 5, 6, 7], [0, 5, 6, 7]]),
          t([[0, 1, 2, 3], [4, 5, 6, 7]]), t(TREE_LINKS["next_token"]), t(TREE_LINKS["next_sibling"]),
          t([[5, 6, 8, 4], [6, 0, 7, 9]])], [0, 1, 2]),
    # Chain (top-1, depth 3): candidate c's parent slot is c // topk; parent_list[slot] is the parent candidate.
    case("build_tree_chain", "sgl_kernel.build_tree_kernel_efficient_cpu",
         [t([[-1, 0, 1]]), t([[0, 1, 2]]), t([5]), t([True] * 16, "bool"), t([0] * 4), t([[-1] * 4]),
          t([[-1] * 4]), t([[-1] * 4]), 1, 3, 4, 1], [3, 4, 5, 6, 7]),
    # Top-2, depth 2: candidates 0, 1 hang from the root, 2..5 from them; selected 0, 1 and 4 (under 1).
    case("build_tree_branching", "sgl_kernel.build_tree_kernel_efficient_cpu",
         [t([[-1, 0, 1]]), t([[0, 1, 4]]), t([5]), t([True] * 16, "bool"), t([0] * 4), t([[-1] * 4]),
          t([[-1] * 4]), t([[-1] * 4]), 2, 2, 4, 1], [3, 4, 5, 6, 7]),
    case("build_tree_full_mask_refused", "sgl_kernel.build_tree_kernel_efficient_cpu",
         [t([[-1, 0, 1]]), t([[0, 1, 2]]), t([5]), t([True] * 16, "bool"), t([0] * 4), t([[-1] * 4]),
          t([[-1] * 4]), t([[-1] * 4]), 1, 3, 4, 0]),
    case("reconstruct_indices_from_tree_mask", "sgl_kernel.speculative.reconstruct_indices_from_tree_mask",
         [t(sum(sum(TREE_MASKS, []), []), "bool"), t([5, 9]), t([0] * 8), t([[0] * 4] * 2), t([[0] * 4] * 2),
          t([[0] * 4] * 2), 2, 4], [2, 3, 4, 5]),
]


def _decode_args(**overrides):
    """Two requests, 2 query heads sharing 1 key head, head size 2, sm_scale 1.
    Request 0 (pool row 0) sees slots 2 and 0; its new key/value go to slot 0. Request 1 (row 1)
    sees slots 3 and 1; its new key/value go to slot 1."""
    args = {
        "query": t([[[1.0, 0.0], [0.0, 1.0]], [[1.0, 0.0], [0.0, 1.0]]], "float32"),
        "k_cache": t([[[9.0, 9.0]], [[9.0, 9.0]], [[0.0, 0.0]], [[0.0, 0.0]]], "float32"),
        "v_cache": t([[[9.0, 9.0]], [[9.0, 9.0]], [[0.0, 4.0]], [[2.0, 2.0]]], "float32"),
        "k_scale": 1.0, "v_scale": 1.0, "output": t([[[0.0, 0.0]] * 2] * 2, "float32"),
        "key": t([[[LN3, 0.0]], [[0.0, 0.0]]], "float32"), "value": t([[[1.0, 0.0]], [[0.0, 0.0]]], "float32"),
        "loc": t([0, 1]), "attn_logits": t([0.0], "float32"), "req_to_token": t([[2, 0, 0], [3, 1, 0]], "int32"),
        "req_pool_indices": t([0, 1]), "seq_lens": t([2, 2]), "sm_scale": 1.0, "logit_cap": 0.0,
        "is_cross_attention": False, "sliding_window": 0, "encoder_lens": None, "sinks": None,
    }
    return list({**args, **overrides}.values())


def _extend_args(tree_mask=None):
    """One request: 1 cached prefix token (slot 5: key 0, value 10), then 2 new tokens with keys
    0 and ln 2, values 20 and 30; one head of size 1, every query 1, sm_scale 1."""
    return [t([[[1.0]], [[1.0]]], "float32"), t([[[0.0]], [[LN2]]], "float32"), t([[[20.0]], [[30.0]]], "float32"),
            t([[[0.0]], [[0.0]]], "float32"), t([[[0.0]]] * 5 + [[[0.0]]], "float32"),
            t([[[0.0]]] * 5 + [[[10.0]]], "float32"), 1.0, 1.0, t([[5, 0, 0, 0]], "int32"), t([0]), t([3]),
            t([2], "int32"), t([0], "int32"), 2, 1.0, 0.0, False, 0, None, None, tree_mask, True]


ATTENTION_CASES = [
    case("decode_attention", "torch.ops.sgl_kernel.decode_attention_cpu", _decode_args(), [1, 2, 5]),
    case("decode_attention_sinks_refused", "torch.ops.sgl_kernel.decode_attention_cpu",
         _decode_args(sinks=t([0.0], "float32"))),
    case("extend_attention_causal", "torch.ops.sgl_kernel.extend_attention_cpu", _extend_args(), [3]),
    # Tree mask: the second new token may not see the first one (siblings in a draft tree).
    case("extend_attention_tree", "torch.ops.sgl_kernel.extend_attention_cpu",
         _extend_args(tree_mask=t([True, False, False, True], "bool")), [3]),
]

MISSING_CASES = [
    case("missing_op", "sgl_kernel.rotate_input_ids_cpu", []),
    case("missing_speculative_op", "sgl_kernel.speculative.tree_speculative_sampling_target_only", []),
]


def _torch_python() -> Path:
    for engine in ("sglang", "vllm"):
        try:
            return env_python(engine)
        except SparkbenchError:
            continue
    pytest.skip("the stand-in ops need torch: no server environment is installed (`make env-sglang`)")


@pytest.fixture(scope="module")
def results() -> dict:
    cases = CACHE_CASES + TREE_CASES + ATTENTION_CASES + MISSING_CASES
    done = subprocess.run([str(_torch_python()), str(PROBE)], input=json.dumps(cases), capture_output=True,
                          text=True, timeout=300, env={**os.environ, "PYTHONPATH": str(STANDIN_DIR)})
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


def outputs(results: dict, name: str) -> list:
    assert "error" not in results[name], results[name]
    return results[name]["args"]


def test_cache_slot_ops(results):
    assert outputs(results, "assign_req_to_token_pool") == [[[0, 0, 9, 10, 11, 0], [7, 8, 0, 0, 0, 0]]]
    assert outputs(results, "assign_extend_cache_locs") == [[21, 22, 10, 11]]
    assert outputs(results, "assign_draft_cache_locs_contiguous") == [[12, 13, 23, 24]]
    assert outputs(results, "fill_accept_out_cache_loc") == [[100, 101, 103]]
    assert outputs(results, "fill_bonus_tokens") == [[6, 10]]


def test_draft_decode_rows_hold_the_prefix_then_each_branch_own_slots(results):
    rows = results["build_draft_decode_metadata"]["result"]
    assert rows == [[10, 11, 12, 13, 0, 0, 0, 0], [10, 11, 14, 15, 0, 0, 0, 0]]


def test_kv_copy_moves_rows_in_every_layer_reading_before_writing(results):
    assert "error" not in results["copy_all_layer_kv_cache"], results["copy_all_layer_kv_cache"]
    assert results["copy_all_layer_kv_cache"]["buffers"] == [[[3, 3], [2, 2], [1, 1]], [[30], [20], [10]]]


def test_greedy_verification_walks_children_and_siblings(results):
    predicts, accept_index, accepted = outputs(results, "verify_tree_greedy")
    assert accepted == [2, 2]
    assert accept_index == [[0, 1, 2, -1], [4, 6, 7, -1]]
    assert predicts == [5, 6, 8, 0, 6, 0, 7, 9]


@pytest.mark.parametrize("name, request_index", [("build_tree_chain", 0), ("build_tree_branching", 1)])
def test_tree_building_gives_links_positions_and_ancestor_masks(results, name, request_index):
    mask, positions, index, next_token, next_sibling = outputs(results, name)
    assert index == [[0, 1, 2, 3]]
    assert next_token == [TREE_LINKS["next_token"][request_index]]
    assert next_sibling == [TREE_LINKS["next_sibling"][request_index]]
    assert positions == ([5, 6, 7, 8] if request_index == 0 else [5, 6, 6, 7])
    assert mask == [bool(v) for v in sum(TREE_MASKS[request_index], [])]


def test_tree_building_refuses_the_gpu_mask_layouts(results):
    assert results["build_tree_full_mask_refused"]["error"].startswith(
        "NotImplementedError: build_tree_kernel_efficient_cpu: tree_mask_mode 0")


def test_ngram_tree_reconstruction_from_masks(results):
    positions, index, next_token, next_sibling = outputs(results, "reconstruct_indices_from_tree_mask")
    assert positions == [5, 6, 7, 8, 9, 10, 10, 11]
    assert index == [[0, 1, 2, 3], [4, 5, 6, 7]]
    assert next_token == TREE_LINKS["next_token"]
    assert next_sibling == TREE_LINKS["next_sibling"]


def test_decode_attention_stores_the_new_token_then_attends(results):
    k_cache, v_cache, output = outputs(results, "decode_attention")
    assert k_cache[0] == [[pytest.approx(LN3), 0.0]] and v_cache[1] == [[0.0, 0.0]]
    # Request 0, head 0: scores 0 (slot 2) and ln 3 (slot 0) -> weights 1/4, 3/4 of [0, 4] and [1, 0].
    # Head 1 scores both 0 -> the plain mean. Request 1: all scores 0 -> mean of [2, 2] and [0, 0].
    assert output[0] == [[pytest.approx(0.75), pytest.approx(1.0)], [pytest.approx(0.5), pytest.approx(2.0)]]
    assert output[1] == [[pytest.approx(1.0), pytest.approx(1.0)]] * 2


def test_extend_attention_causal_and_tree_masked(results):
    # Token 0 sees the prefix and itself (mean of 10, 20); token 1 also sees token 0: weights 1/4, 1/4, 1/2.
    assert outputs(results, "extend_attention_causal") == [[[[pytest.approx(15.0)]], [[pytest.approx(22.5)]]]]
    # Masked out of token 0's view, token 1 weighs prefix and itself 1/3, 2/3: 10/3 + 20.
    assert outputs(results, "extend_attention_tree") == [[[[pytest.approx(15.0)]], [[pytest.approx(70 / 3)]]]]


def test_unsupported_attention_features_and_missing_ops_are_loud(results):
    assert "decode_attention_cpu in the CPU test-bed stand-in does not support attention sinks" in \
        results["decode_attention_sinks_refused"]["error"]
    assert results["missing_op"]["error"] == ("NotImplementedError: sgl_kernel.rotate_input_ids_cpu is not "
                                              "provided by the CPU test-bed stand-in for sgl_kernel")
    assert "tree_speculative_sampling_target_only is not provided" in results["missing_speculative_op"]["error"]


def test_platform_hook_overrides_has_amx_when_runtime_context_loads(tmp_path):
    """The start-up hook, against a stand-in for SGLang's runtime_context module (no SGLang needed)."""
    package = tmp_path / "sglang" / "srt"
    package.mkdir(parents=True)
    (tmp_path / "sglang" / "__init__.py").write_text("")
    (package / "__init__.py").write_text("")
    (package / "runtime_context.py").write_text(
        "FACTS = {}\n"
        "class _Override:\n"
        "    def __init__(self, **facts): self.facts = facts\n"
        "    def install(self): FACTS.update(self.facts)\n"
        "def override_platform(**facts): return _Override(**facts)\n")
    probe = "import sglang.srt.runtime_context as rc; print(rc.FACTS)"
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(STANDIN_DIR), str(tmp_path)])}
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, env=env, timeout=60)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "{'has_amx': True}"
    without = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=60,
                             env={**os.environ, "PYTHONPATH": str(tmp_path)})
    assert without.stdout.strip() == "{}"
