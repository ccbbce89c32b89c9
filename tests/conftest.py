"""pytest's hooks and fixtures; the helpers the tests share are in tests/support.py."""
import os

import pytest
from hypothesis import settings

from support import fresh, run, run_ml

# Property tests draw the same examples every run, so CI never passes or fails by chance;
# TAPEML_FUZZ_RANDOM=1 draws new ones (run it by hand to explore).
settings.register_profile("tapeml", derandomize=os.environ.get("TAPEML_FUZZ_RANDOM") != "1", database=None)
settings.load_profile("tapeml")


@pytest.fixture
def ml():
    return run_ml


@pytest.fixture(autouse=True)
def _float64_after_each_test():
    """The float type is process state (ops.FLOAT): a test or golden program that calls
    set_dtype("float32") in-process must not leave it to the next test."""
    yield
    from tapeml.array import ops
    ops.set_dtype("float64")


@pytest.fixture
def f32():
    """An interpreter in float32 mode (the autouse fixture above puts float64 back)."""
    return run('set_dtype("float32")', fresh())
