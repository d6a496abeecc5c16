"""The CPU test bed: a tiny model built offline and pinned server environments.

Used by the end-to-end tests and as the embedded default server. It exists so that the harness can
be exercised against REAL inference servers on a machine without a GPU; nothing here is used when
sparkbench is pointed at a real deployment with `--server URL`.
"""
