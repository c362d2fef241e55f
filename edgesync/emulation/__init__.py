"""Emulated heterogeneity: device profiles and their throttle, wrapped around the trainer's step."""
from edgesync.emulation.profiles import (  # noqa: F401
    DESCRIPTIONS, NAMED, ConstantProfile, FactorSampler, GammaProfile, Profile, parse_profile,
)
