"""pytest's hooks and fixtures for every folder of tests/ (syntax, array, evaluator, builtins, faces,
session, end_to_end); the helpers the tests share are in tests/support.py (and fd.py, kernel_support.py,
cross_device.py), importable by name from each folder (pyproject's pytest `pythonpath`)."""
import os

import numpy as np
import pytest
from hypothesis import Phase, settings

from support import ROOT, fresh, run, run_ml

# Property tests draw the same examples every run, so CI never passes or fails by chance;
# TAPEML_FUZZ_RANDOM=1 draws new ones (run it by hand to explore).
# No explain phase: it traces every line of a failing test's reruns (sys.settrace), which on a
# slow example (a run on torch:cpu) turned one failure into a CI run that did not end.
settings.register_profile("tapeml", derandomize=os.environ.get("TAPEML_FUZZ_RANDOM") != "1", database=None,
                          phases=[p for p in Phase if p is not Phase.explain])
settings.load_profile("tapeml")


def _signals_not_ignored():
    """A run under nohup, or started in the background by a shell without job control, ignores
    SIGHUP or SIGINT, and every child inherits that: the tests that send them to a tapeml process
    would see it carry on. The suite's processes start with the signals' usual dispositions."""
    import signal
    for sig, handler in ((signal.SIGHUP, signal.SIG_DFL), (signal.SIGINT, signal.default_int_handler)):
        if signal.getsignal(sig) == signal.SIG_IGN:
            signal.signal(sig, handler)


_signals_not_ignored()


def pytest_addoption(parser):
    parser.addoption("--device", default=None,
                     help="run the suite's programs on this tapeml device (numpy, torch:cpu, ...): "
                          "the same as TAPEML_DEVICE, which subprocesses inherit")
    parser.addoption("--slow", action="store_true", default=False,
                     help="also run the tests marked slow (the long sweeps; the same as TAPEML_SLOW=1, "
                          "which CI sets)")


def pytest_configure(config):
    device = config.getoption("--device")
    if device:
        os.environ["TAPEML_DEVICE"] = device
    if config.getoption("--slow"):
        # the same as TAPEML_SLOW=1 from here on: the test modules size their sweeps with run_slow()
        # when they are imported (after this hook), and the subprocesses they start see it too
        os.environ["TAPEML_SLOW"] = "1"


def run_slow(config=None):
    """Whether the tests marked slow run: --slow or TAPEML_SLOW=1 (CI's runs). A test module may
    call it at import (`from conftest import run_slow`) to size a sweep: a short form by default,
    the long one under --slow."""
    return os.environ.get("TAPEML_SLOW") == "1" or bool(config and config.getoption("--slow"))


def examples(n: int) -> int:
    """A property test's example count: n under --slow or TAPEML_SLOW=1, a tenth of it (at least 20)
    in a plain `pytest`. The draw is derandomized, so the short form checks the first of the same
    examples as the long one."""
    return n if run_slow() else max(20, n // 10)


def slow_after(k: int, params: list) -> list:
    """A parametrized sweep whose first k cases run in a plain `pytest` and the rest only with
    --slow (each a pytest.param marked slow, so every case keeps its id)."""
    def marked(p):
        values = p.values if isinstance(p, type(pytest.param())) else (p if isinstance(p, tuple) else (p,))
        marks = p.marks if isinstance(p, type(pytest.param())) else ()
        pid = p.id if isinstance(p, type(pytest.param())) else None
        return pytest.param(*values, marks=(*marks, pytest.mark.slow), id=pid)
    return list(params[:k]) + [marked(p) for p in params[k:]]


def pytest_collection_modifyitems(config, items):
    if not run_slow(config):
        skip_slow = pytest.mark.skip(reason="marked slow: runs with --slow or TAPEML_SLOW=1 (CI)")
        for item in items:
            if "slow" in item.keywords:
                item.add_marker(skip_slow)
    device = os.environ.get("TAPEML_DEVICE", "").strip()
    if device and device != "numpy":
        skip = pytest.mark.skip(reason=f"a test of NumPy-internal paths: runs on the numpy device, not {device}")
        for item in items:
            if "numpy_only" in item.keywords:
                item.add_marker(skip)


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    """A skip says why in the summary (addopts' -rs): one written without a reason gets a line that
    says so and names the test, rather than pytest's bare "unconditional skip"."""
    outcome = yield
    report = outcome.get_result()
    if report.skipped and isinstance(report.longrepr, tuple) and len(report.longrepr) == 3:
        path, line, reason = report.longrepr
        if reason.strip() in ("", "Skipped", "Skipped:", "unconditional skip", "Skipped: unconditional skip"):
            report.longrepr = (path, line, f"Skipped: {item.nodeid} gives no reason (write one in its skip)")


@pytest.fixture
def ml():
    return run_ml


@pytest.fixture(autouse=True)
def _float64_after_each_test():
    """The float type is process state (ops.FLOAT): a test or golden program that calls
    set_dtype("float32") in-process must not leave it to the next test."""
    # `--device` run in-process (support.run_cli) also sets TAPEML_DEVICE for the kernel and the
    # docs' runners, as a real process would until it exits: put the variable back too
    device = os.environ.get("TAPEML_DEVICE")
    yield
    if device is None:
        os.environ.pop("TAPEML_DEVICE", None)
    else:
        os.environ["TAPEML_DEVICE"] = device
    from tapeml.array import backend, context, ops
    ops.set_dtype("float64")
    # the device too (a program's set_device in the process default state); TAPEML_DEVICE's is the default
    context.DEFAULT.values.pop("backend", None)
    context.DEFAULT.values.pop("made", None)


@pytest.fixture(autouse=True)
def _numpy_quiet_where_tests_call_primitives(request):
    """The array and builtins tests call primitives and builtins directly from Python, outside any
    Session or run; tapeml's own calls compute inf and nan quietly (a Session's `entered()` and
    `Interpreter.run` set NumPy's error state and put the caller's back), so these tests do too.
    The other layers' tests keep NumPy's default, so a face that left the state changed is seen."""
    parts = request.node.path.parts
    if "array" in parts or "builtins" in parts:
        with np.errstate(all="ignore"):
            yield
    else:
        yield


@pytest.fixture
def f32():
    """An interpreter in float32 mode (the autouse fixture above puts float64 back)."""
    return run('set_dtype("float32")', fresh())


@pytest.fixture(autouse=True)
def _diagnostics_off_after_each_test():
    """check_nan, the profiler and show_tape's recorder are session state too (the process
    default's, in-process): a test that turns one on must not leave it to the next."""
    yield
    from tapeml.array import diagnostics, tape
    if diagnostics._ACTIVE or tape.Box.__init__ is not tape._PLAIN_INIT:
        # every session's modes, not only the process default's: a Session a test dropped with
        # check_nan on (the slow sweeps run every builtin's example, check_nan's among them) left
        # the tape's hook on for every test after it
        for d in list(diagnostics._ACTIVE):
            d.check_nan, d.profiler, d.recorder = False, None, None
            d.changed()
        from tapeml.evaluator.interpreter import Interpreter
        Interpreter(load_prelude=False).set_diagnostics(check_nan=False, profiler=None, recorder=None)
        tape.set_node_hook(None)


SITE_EXTRA = ("mkdocs", "material", "pymdownx", "latex2mathml")


def site_extra_missing():
    """The first module of the extra tapeml[docs] that is not installed, else None."""
    import importlib.util
    return next((m for m in SITE_EXTRA if importlib.util.find_spec(m) is None), None)


@pytest.fixture(scope="session")
def built_site(tmp_path_factory):
    """The docs website built once per test session from this checkout's docs/ (tests/faces/test_site*.py);
    skips where the extra tapeml[docs] is not installed."""
    missing = site_extra_missing()
    if missing:
        reason = (f"the docs website needs the extra tapeml[docs] ({missing} is not installed): "
                  f"pip install -e \".[docs]\"")
        if os.environ.get("TAPEML_REQUIRE_BROWSER") == "1":     # CI: the site tests must run
            pytest.fail(f"TAPEML_REQUIRE_BROWSER=1 but {reason}")
        pytest.skip(reason)
    from tapeml.faces.docs.site import build_site
    pages, site_dir = build_site(ROOT, str(tmp_path_factory.mktemp("site") / "site"))
    return site_dir
