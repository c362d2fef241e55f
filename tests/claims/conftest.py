"""Each claim test measures this machine's step time and coordinator costs afresh, as a first run on a new
machine does, into a cache of its own (never the user's ~/.cache, which an earlier version may have
filled): a test's figures depend on this checkout and this machine only."""
from __future__ import annotations

import pytest


@pytest.fixture(scope="module", autouse=True)
def fresh_calibration_cache(tmp_path_factory):
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("EDGESYNC_CACHE", str(tmp_path_factory.mktemp("calibration-cache")))
        yield
