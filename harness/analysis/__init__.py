"""Analysis of recorded runs: summary tables, comparisons with intervals, the published reference."""
