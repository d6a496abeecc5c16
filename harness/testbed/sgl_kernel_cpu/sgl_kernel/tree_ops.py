"""Draft-tree ops of speculative decoding: build the tree EAGLE/STANDALONE drafts form, verify it
greedily, and rebuild NGRAM's tree from its mask.

A tree has n = num_draft_tokens nodes per request; node 0 is the last verified token (the root)
and the rest are drafts. `retrive_next_token[b, i]` is node i's first child and
`retrive_next_sibling[b, i]` its next sibling (-1: none); `retrive_index[b, i] = b * n + i`, the
node's row in the flattened verify batch.
"""

from __future__ import annotations

import torch

QLEN_ONLY = 1  # SGLang TreeMaskMode.QLEN_ONLY: an n x n mask per request, no prefix columns


def verify_tree_greedy_cpu(predicts: torch.Tensor, accept_index: torch.Tensor, accept_token_num: torch.Tensor,
                           candidates: torch.Tensor, retrive_index: torch.Tensor,
                           retrive_next_token: torch.Tensor, retrive_next_sibling: torch.Tensor,
                           target_predict: torch.Tensor) -> None:
    """SGLang `verify_tree_greedy` (kernels/ops/speculative/spec_tree.py): from the root, descend
    while some child's draft token equals the target model's argmax at the current node.

    For each accepted node: predicts[current] = the target token, accept_index[b, k] = the node's
    row; accept_token_num[b] = drafts accepted; finally predicts[last accepted] = the target's
    token there (the bonus token).
    """
    targets = target_predict.reshape(-1)
    predicted = predicts.view(-1)
    for b in range(candidates.shape[0]):
        last = int(retrive_index[b, 0])
        accept_index[b, 0] = last
        accepted = 0
        node = 0
        for _ in range(1, accept_index.shape[1]):
            node = _matching_child(b, node, int(targets[last]), candidates, retrive_next_token, retrive_next_sibling)
            if node < 0:
                break
            predicted[last] = targets[last]
            accepted += 1
            last = int(retrive_index[b, node])
            accept_index[b, accepted] = last
        accept_token_num[b] = accepted
        predicted[last] = targets[last]


def _matching_child(b: int, node: int, target: int, candidates: torch.Tensor, next_token: torch.Tensor,
                    next_sibling: torch.Tensor) -> int:
    """The first child of `node` whose draft token is `target`, or -1."""
    child = int(next_token[b, node])
    while child != -1:
        if int(candidates[b, child]) == target:
            return child
        child = int(next_sibling[b, child])
    return -1


def build_tree_kernel_efficient_cpu(parent_list: torch.Tensor, selected_index: torch.Tensor,
                                    seq_lens: torch.Tensor, tree_mask: torch.Tensor, positions: torch.Tensor,
                                    retrive_index: torch.Tensor, retrive_next_token: torch.Tensor,
                                    retrive_next_sibling: torch.Tensor, topk: int, depth: int,
                                    num_draft_tokens: int, tree_mask_mode: int) -> None:
    """SGLang `build_tree_kernel_efficient` (spec_tree.py), QLEN_ONLY mask mode (the one SGLang
    uses on CPU). Draft node i >= 1 is the (i-1)-th selected candidate; its parent is the node
    whose selected candidate produced it (`parent_list[selected // topk]`; 0 means the root).
    Writes the retrieve links, each node's position (seq_len + depth in the tree) and the mask
    row of each node: the root and the node's ancestors, itself included.
    """
    if tree_mask_mode != QLEN_ONLY:
        raise NotImplementedError(f"build_tree_kernel_efficient_cpu: tree_mask_mode {tree_mask_mode} "
                                  f"(the CPU stand-in builds the QLEN_ONLY mask only)")
    n = num_draft_tokens
    masks = tree_mask.view(-1, n, n)
    for b, seq_len in enumerate(seq_lens.tolist()):
        parent = _parent_nodes(parent_list[b].tolist(), selected_index[b].tolist(), topk, n)
        retrive_index[b] = torch.arange(b * n, (b + 1) * n)
        for i in range(n - 1, 0, -1):  # in reverse, so each node's child list ends up in index order
            if parent[i] >= 0:
                retrive_next_sibling[b, i] = retrive_next_token[b, parent[i]]
                retrive_next_token[b, parent[i]] = i
        masks[b] = False
        positions[b * n] = seq_len
        masks[b, 0, 0] = True
        for i in range(1, n):
            path = _path_to_root(i, parent, depth)
            masks[b, i, 0] = True
            masks[b, i, path] = True
            positions[b * n + i] = seq_len + len(path)


def _parent_nodes(parents: list[int], selected: list[int], topk: int, n: int) -> list[int]:
    """Tree node of each node's parent: 0 for children of the root, -1 when the parent is not
    among the selected candidates (SGLang then leaves the node unlinked)."""
    node_of_candidate: dict[int, int] = {}
    for i, candidate in enumerate(selected[:n - 1]):
        node_of_candidate.setdefault(candidate, i + 1)  # the first match, as SGLang searches
    result = [-1] * n
    for i in range(1, n):
        parent_slot = selected[i - 1] // topk
        result[i] = 0 if parent_slot == 0 else node_of_candidate.get(parents[parent_slot], -1)
    return result


def _path_to_root(node: int, parent: list[int], depth: int) -> list[int]:
    """The node and its draft ancestors (the root excluded), at most `depth` of them."""
    path = []
    while node > 0 and len(path) < depth:
        path.append(node)
        node = parent[node]
    return path


def reconstruct_indices_from_tree_mask(tree_mask: torch.Tensor, verified_seq_len: torch.Tensor,
                                       positions: torch.Tensor, retrive_index: torch.Tensor,
                                       retrive_next_token: torch.Tensor, retrive_next_sibling: torch.Tensor,
                                       batch_size: int, draft_token_num: int) -> None:
    """SGLang `sgl_kernel.speculative.reconstruct_indices_from_tree_mask`, contract as written in
    SGLang's kernels/ops/speculative/reconstruct_tree.py. With ancestors[i, j] = mask[b, i, j] and
    j < i: position = seq_len + number of ancestors; parent = the last ancestor (-1: none);
    next_token = the first later node that has this one as an ancestor; next_sibling = the first
    later node with the same parent (-1 for a node without a parent)."""
    n = draft_token_num
    masks = tree_mask.view(-1, n, n)[:batch_size].bool()
    later = torch.ones(n, n, dtype=torch.bool).tril(-1)  # [i, j]: j < i
    for b in range(batch_size):
        ancestors = masks[b] & later
        parent = [max((j for j in range(i) if ancestors[i, j]), default=-1) for i in range(n)]
        for i in range(n):
            positions[b * n + i] = int(verified_seq_len[b]) + int(ancestors[i].sum())
            retrive_index[b, i] = b * n + i
            retrive_next_token[b, i] = next((k for k in range(i + 1, n) if ancestors[k, i]), -1)
            siblings = (k for k in range(i + 1, n) if parent[k] == parent[i])
            retrive_next_sibling[b, i] = next(siblings, -1) if parent[i] >= 0 else -1
