"""Shared test configuration: hypothesis profiles (`ci` is derandomized, with no deadline)."""

import os

from hypothesis import settings

from ngrules.verification.profiles import register_profiles

register_profiles()
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "dev"))
