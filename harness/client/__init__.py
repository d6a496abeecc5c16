"""Clients: send one prompt to a server, stamp monotonic times, keep the raw facts. No metrics here."""
