"""The configuration guard: server profiles, the pure checks, and the checks against a live server."""
