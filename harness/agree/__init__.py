"""Top-k agreement between two servers: does an optimization change the answers?

Pipeline: `sequences` (the token ids to score) -> `servers` (each server scores them, teacher-forced,
through its engine adapter's `score_tokens`) -> `run` (raw scores on disk) -> `metrics` and `tables`
(per position, summary, bands) -> `report` (figure, HTML / Markdown section). See docs/agreement.md.
"""
