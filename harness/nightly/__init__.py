"""The nightly regression job: configuration, gate, history, trend, and the job that runs a night."""
