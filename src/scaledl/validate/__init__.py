"""Validation of the simulated platforms: what they predict beside what was measured (`scaledl validate`)."""
