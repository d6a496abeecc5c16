"""Shared test settings: the tiers are folders (unit/ uses fakes, e2e/ drives real servers)."""
