import io
import contextlib
import os

import pytest
from hypothesis import settings

# Property tests draw the same examples every run, so CI never passes or fails by chance;
# TAPEML_FUZZ_RANDOM=1 draws new ones (run it by hand to explore).
settings.register_profile("tapeml", derandomize=os.environ.get("TAPEML_FUZZ_RANDOM") != "1", database=None)
settings.load_profile("tapeml")

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SHARED = os.path.join(os.path.dirname(ROOT), "shared")


def run_cli(args, stdin_text=None):
    """Run the tapeml CLI in-process; return (exit code, combined stdout+stderr)."""
    from tapeml.faces import cli
    buf = io.StringIO()
    with contextlib.redirect_stdout(buf), contextlib.redirect_stderr(buf):
        code = cli.main(list(args))
    return code, buf.getvalue()


def run_ml(source):
    """Run tapeml source in-process; return (exit code, combined output)."""
    return run_cli(["-c", source])


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


@pytest.fixture(autouse=True)
def _diagnostics_off_after_each_test():
    """check_nan, the profiler and show_tape's recorder are session state too (the process
    default's, in-process): a test that turns one on must not leave it to the next."""
    yield
    from tapeml.array import diagnostics
    if diagnostics._ACTIVE:
        from tapeml.evaluator.interpreter import Interpreter
        Interpreter(load_prelude=False).set_diagnostics(check_nan=False, profiler=None, recorder=None)


@contextlib.contextmanager
def allocates_at_most(limit_bytes):
    """Fail when the block's peak allocation (NumPy arrays included: NumPy reports to
    tracemalloc) passes `limit_bytes`: "refused before allocating" checked by memory, not time."""
    import tracemalloc
    tracemalloc.start()
    try:
        yield
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak <= limit_bytes, f"peak allocation {peak / 1e6:.0f} MB > {limit_bytes / 1e6:.0f} MB"


def page_of_square_with_vjp(name, vjp):
    """Build the docs page of a throwaway builtin `name`(x) = x^2 whose primitive has the VJP
    `vjp(g, x)` (a wrong one, for the docs' gradient gate); return (page, failures). The builtin
    and its primitive are removed afterwards."""
    from tapeml.faces import docs as docgen
    from tapeml.array import ops
    import tapeml.builtins.registry as reg
    prim = ops.primitive(f"docs_test_{name}", lambda x: x * x,
                         lambda g, ans, saved, tracked, x: (vjp(g, x),))
    wrong = reg.Builtin(name, "Math", "x^2 with a wrong gradient.", lambda x: prim(x),
                        [reg.P("x", "array")], differentiable=True)
    entry = docgen.Entry(name, "Math", "demo", wrong.params, examples=[f"{name}([1, 2])"],
                         differentiable=True, builtin=wrong)
    reg.REGISTRY[name] = wrong
    failures = []
    try:
        page = docgen.build_page(entry, "/nonexistent-img-dir", failures)
    finally:
        del reg.REGISTRY[name]
        ops.TABLE.pop(f"docs_test_{name}", None)
    return page, failures
