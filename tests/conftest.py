"""Shared test configuration: hypothesis profiles (HYPOTHESIS_PROFILE=default|ci|deep)."""

from __future__ import annotations

import os

from hypothesis import HealthCheck, settings

settings.register_profile(
    "default", deadline=None, suppress_health_check=[HealthCheck.too_slow]
)
settings.register_profile("ci", parent=settings.get_profile("default"), derandomize=True)
settings.register_profile("deep", parent=settings.get_profile("default"), max_examples=20_000)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "default"))
