"""Shared test configuration: hypothesis profiles (`ci` is derandomized, with no deadline), and
a verdict cache of each test's own (never the user's)."""

import itertools
import os
import shutil
import tempfile

import pytest
from hypothesis import settings

from ngrules.verification.profiles import register_profiles

register_profiles()
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "dev"))

#: The verdict cache (`ngrules.verification.cache`) of the whole session lives here, removed at
#: the end; each test gets a folder of its own below it (created only if it verifies), so a
#: verdict one test computed is never another's (tests that change ops or the verifier).
_VERDICTS = tempfile.mkdtemp(prefix="ngrules-test-verdicts-")
os.environ["NGRULES_VERDICT_CACHE"] = os.path.join(_VERDICTS, "session")
_COUNT = itertools.count()


@pytest.fixture(autouse=True)
def _own_verdict_cache(monkeypatch):
    monkeypatch.setenv("NGRULES_VERDICT_CACHE", os.path.join(_VERDICTS, str(next(_COUNT))))


def pytest_sessionfinish(session, exitstatus):
    shutil.rmtree(_VERDICTS, ignore_errors=True)


@pytest.fixture
def scratch_ops():
    """The op table (and declared ops, fast kernels) restored after the test, whatever it
    declared or registered: tests that add ops never leak them into other tests."""
    import ngrules as ng
    from ngrules.ir import declared
    from ngrules.lang import declared_ops

    tables = (ng.OPS, declared.REFERENCE, declared.FAST, declared.SOURCE, declared.USES,
              declared_ops.DECLARED)
    saved = [dict(t) for t in tables]
    yield
    for table, old in zip(tables, saved):
        table.clear()
        table.update(old)


@pytest.fixture(scope="session")
def onnx_node_cases():
    """ONNX's backend node test cases (4 s to build), built once per worker: the tests that
    read them (they never change them) are in the xdist group `onnx_node_cases`, so
    `--dist loadgroup` runs them on one worker and builds the cases once."""
    from ngrules.interop.onnx.backend import node_testcases

    return tuple(node_testcases())
