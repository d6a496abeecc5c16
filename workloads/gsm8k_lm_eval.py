"""GSM8K scored as lm-evaluation-harness scores it, so a run sits beside a published lm-eval figure.

lm-eval (pinned: LM_EVAL_VERSION) scores a GSM8K task in three steps, all stated in the task's yaml
(`lm_eval/tasks/gsm8k/gsm8k.yaml`, `gsm8k-cot.yaml`) and reproduced here exactly:
1. generation stops at the task's `until` strings: the text is cut before the first one;
2. each filter (`lm_eval/filters/extraction.py` RegexFilter, then `selection.py` take_first) takes
   one match of its regex: `group_select` 0 is the FIRST match, -1 the last; a match of a pattern
   with groups is its first non-empty group; the match is stripped; no match is "[invalid]";
3. `exact_match` (`lm_eval/api/metrics.py` exact_match_hf_evaluate) deletes each of
   `regexes_to_ignore` from prediction and reference in turn, lower-cases both (ignore_case), and
   compares the strings: "18.00" is not "18", and "[invalid]" never equals a number.

Two tasks, four figures, named as lm-eval names them (`<task>` / `exact_match,<filter>`):
- `gsm8k`: the layout sparkbench's GSM8K prompts use (`Question:`/`Answer:`, shots ending `#### N`);
  strict-match is the first `#### N`.
- `gsm8k_cot`: `Q:`/`A:` prompts with eight fixed shots ending "The answer is N."; strict-match is
  the first "The answer is N.", so it only scores answers written that way. Its flexible-extract is
  the same filter as gsm8k's, but the text is cut at `Q:` rather than at `Question:`.
The reference is the number after the last `####` of the gold answer (both tasks reduce it so).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

LM_EVAL_VERSION = "0.4.13"
FALLBACK = "[invalid]"  # RegexFilter's default fallback
# metric_list of both tasks: exact_match with these settings (ignore_punctuation false).
REGEXES_TO_IGNORE = (",", r"\$", "(?s).*#### ", r"\.$")
FLEXIBLE_PATTERN = r"(-?[$0-9.,]{2,})|(-?[0-9]+)"


@dataclass(frozen=True)
class LmEvalFilter:
    name: str  # lm-eval's filter name: strict-match or flexible-extract
    regex_pattern: str
    group_select: int  # 0: first match; -1: last


@dataclass(frozen=True)
class LmEvalTask:
    name: str
    until: tuple[str, ...]  # generation_kwargs.until
    filters: tuple[LmEvalFilter, ...]

    def metric(self, lm_filter: LmEvalFilter) -> str:
        """The summary metric of one filter: `lm_eval_<task>_exact_match,<filter>`."""
        return f"lm_eval_{self.name}_exact_match,{lm_filter.name}"

    def column(self, lm_filter: LmEvalFilter) -> str:
        """The scored table's column stem of one filter: `lm_eval_<task>_<filter with _>`."""
        return f"lm_eval_{self.name}_{lm_filter.name.replace('-', '_')}"


FLEXIBLE = LmEvalFilter("flexible-extract", FLEXIBLE_PATTERN, -1)
TASKS = (
    LmEvalTask("gsm8k", ("Question:", "</s>", "<|im_end|>"),
               (LmEvalFilter("strict-match", r"#### (\-?[0-9\.\,]+)", 0), FLEXIBLE)),
    LmEvalTask("gsm8k_cot", ("Q:", "</s>", "<|im_end|>"),
               (LmEvalFilter("strict-match", r"The answer is (\-?[0-9\.\,]+).", 0), FLEXIBLE)),
)


def truncate(text: str, until: tuple[str, ...]) -> str:
    """The text before the first of the `until` strings, as a generation stopped there would end."""
    for term in until:
        if term:
            text = text.split(term)[0]
    return text


def regex_filter(text: str, lm_filter: LmEvalFilter) -> str:
    """RegexFilter then take_first: the selected match (first non-empty group), stripped, or "[invalid]"."""
    matches = re.findall(lm_filter.regex_pattern, text)
    if not matches:
        return FALLBACK
    match = matches[lm_filter.group_select]
    if isinstance(match, tuple):
        match = next((part for part in match if part), FALLBACK)
    return match.strip()


def _ignored(text: str) -> str:
    for pattern in REGEXES_TO_IGNORE:
        text = re.sub(pattern, "", text)
    return text.lower()


def exact_match(prediction: str, reference: str) -> bool:
    """exact_match with the tasks' settings: both strings with REGEXES_TO_IGNORE deleted in turn,
    lower-cased, then equal."""
    return _ignored(prediction) == _ignored(reference)


def score_one(text: str, reference: str, task: LmEvalTask, lm_filter: LmEvalFilter) -> tuple[str, bool]:
    """(filtered prediction, exact match) of one completion under one task's filter."""
    prediction = regex_filter(truncate(text, task.until), lm_filter)
    return prediction, exact_match(prediction, reference)


def lm_eval_columns(outputs: list[str], references: list[str]) -> dict[str, list]:
    """Per task and filter, the prediction (`pred_<stem>`) and its exact match (`correct_<stem>`)."""
    columns: dict[str, list] = {}
    for task in TASKS:
        for lm_filter in task.filters:
            scored = [score_one(text, ref, task, lm_filter) for text, ref in zip(outputs, references)]
            columns[f"pred_{task.column(lm_filter)}"] = [pred for pred, _ in scored]
            columns[f"correct_{task.column(lm_filter)}"] = [ok for _, ok in scored]
    return columns


def metric_columns() -> list[tuple[str, str]]:
    """(summary metric, correct column) of every task and filter, in task order."""
    return [(task.metric(f), f"correct_{task.column(f)}") for task in TASKS for f in task.filters]
