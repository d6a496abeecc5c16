"""Records: what a run leaves on disk, the per-request rows and the manifest of the run directory."""
