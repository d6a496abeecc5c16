"""Score GSM8K completions with lm-eval's own code; run by the lm-eval tool environment's Python.

Reads JSON from stdin, `[{"text": completion, "answer": full gold answer}, ...]`, and writes
`{task: {filter: [[prediction, exact_match], ...]}}`. Everything comes from the installed lm-eval:
the task yaml (filters, `until`, the exact_match settings), the filter pipeline
(`build_filter_ensemble`: RegexFilter, take_first) and the registered exact_match metric. Only two
steps are written out here, each as lm-eval does it: the cut at `until` (the server stops there; the
local models split the text the same way) and each task's doc_to_target template.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import lm_eval
import yaml
from lm_eval.api.instance import Instance
from lm_eval.api.registry import get_metric
from lm_eval.filters import build_filter_ensemble

TASK_FILES = {"gsm8k": "gsm8k.yaml", "gsm8k_cot": "gsm8k-cot.yaml"}
TARGETS = {  # the tasks' doc_to_target templates
    "gsm8k": lambda answer: answer,
    "gsm8k_cot": lambda answer: answer.split("####")[-1].strip(),
}


def cut(text: str, until: list[str]) -> str:
    for term in until:
        if term:
            text = text.split(term)[0]
    return text


def score_task(task: str, rows: list[dict]) -> dict[str, list]:
    spec = yaml.safe_load((Path(lm_eval.__file__).parent / "tasks" / "gsm8k" / TASK_FILES[task]).read_text())
    assert spec["task"] == task
    until = spec["generation_kwargs"]["until"]
    (metric_spec,) = spec["metric_list"]
    kwargs = {k: v for k, v in metric_spec.items() if k not in ("metric", "aggregation", "higher_is_better")}
    metric = get_metric(metric_spec["metric"])
    scored = {}
    for entry in spec["filter_list"]:
        ensemble = build_filter_ensemble(entry["name"], [(f["function"], {k: v for k, v in f.items() if k != "function"})
                                                         for f in entry["filter"]])
        instances = []
        for idx, row in enumerate(rows):
            inst = Instance(request_type="generate_until", doc=row, arguments=("", {"until": until}), idx=idx)
            inst.resps = [cut(row["text"], until)]
            instances.append(inst)
        ensemble.apply(instances)
        results = []
        for inst, row in zip(instances, rows):
            prediction = inst.filtered_resps[entry["name"]]
            match = metric(references=[TARGETS[task](row["answer"])], predictions=[prediction], **kwargs)
            results.append([prediction, bool(match[metric_spec["metric"]])])
        scored[entry["name"]] = results
    return scored


if __name__ == "__main__":
    rows = json.load(sys.stdin)
    json.dump({"version": lm_eval.__version__, **{task: score_task(task, rows) for task in TASK_FILES}}, sys.stdout)
