"""Engines: talk to an inference server, stamp monotonic times, keep the raw facts. No metrics here."""
