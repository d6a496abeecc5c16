"""The synthetic-vs-GSM8K gap taken apart: a factorial run of the three causes the published
evaluation names for speculation paying more on its synthetic workload (3.90 vs 2.68 accepted
tokens a round, +185% vs +42.5%).

- `design`: the factors (content, sampling, length), their levels, and the cells;
- `run`: every cell sent to a plain and a speculative server of one engine, as ordinary runs;
- `analysis`: per cell, accept length and decode speed-up with intervals; the change from
  the synthetic corner to the GSM8K corner attributed to each factor;
- `intervals`: the BCa bootstrap over prompts and the prompts each kind of interval needs;
- `outputs`: the tables (CSV, Markdown) and the figure;
- `report`: the design folder's own HTML and Markdown report (`sparkbench report DESIGN_FOLDER`).
"""
