"""One Session behind every face: the command line, the REPL, the kernel and the docs builder each
hold a tapeml Session (lang/session/session.py: face_session, Session.of, entered), so two faces
in one process never see each other's float type, generator, device or notes; NumPy's error state
is tapeml's only inside its own calls; a bare Interpreter refuses a bad TAPEML_DEVICE as the
command line does."""
from __future__ import annotations

import io
import os
import subprocess
import sys

import numpy as np
import pytest

from support import run_cli
from tapeml.array import context
from tapeml.faces import runner
from tapeml.faces.docs import run as docrun
from tapeml.faces.repl import Repl
from tapeml.session.session import face_session


def _base() -> str:
    """The device a new session starts on (TAPEML_DEVICE's: the suite runs on torch:cpu too)."""
    return os.environ.get("TAPEML_DEVICE", "").strip() or "numpy"


def _torch() -> bool:
    """Whether a session can move to torch:cpu (PyTorch here, and not already the default)."""
    if _base() != "numpy":
        return False
    try:
        from tapeml.array import backend
        backend.make("torch:cpu")
        return True
    except ValueError:
        return False


class KernelLike:
    """The kernel's Session as the kernel runs a cell (kernel._Cells: runner.run_cell inside
    Session.entered), without ipykernel's sockets."""

    def __init__(self):
        from tapeml.faces import kernel
        self.session = kernel._new_session()
        self.session.interp.out = self.out = io.StringIO()

    def run(self, code: str) -> str:
        self.out.seek(0)
        self.out.truncate()
        shown = []
        with self.session.entered():
            outcome = runner.run_cell(self.session.interp, code, "In[1]", show=shown.append)
        assert outcome.status == runner.OK, outcome.text
        return self.out.getvalue() + "".join(f"{v}\n" for v in shown)


class ReplLike:
    def __init__(self):
        self.buf = io.StringIO()
        self.repl = Repl(face_session(out=self.buf), None, out=self.buf, err=self.buf)

    def run(self, code: str) -> str:
        self.buf.seek(0)
        self.buf.truncate()
        assert self.repl.handle(code)
        return self.buf.getvalue()


def _notes(session) -> bool:
    with session.entered():
        return context.LIVE["notes"]


def test_the_repls_and_the_kernels_sessions_keep_their_own_settings():
    torch = _torch()
    repl, kern = ReplLike(), KernelLike()
    repl.run('set_dtype("float32")\nseed(1)\nnotes(false)')
    kern.run("seed(2)" + ('\nset_device("torch:cpu")' if torch else ""))
    # interleaved: each reads back its own
    assert repl.run("print(dtype([1, 2]), device())") == f"float32 {_base()}\n"
    assert kern.run("print(dtype([1, 2]), device())") == f"float64 {'torch:cpu' if torch else _base()}\n"
    r1, k1 = float(repl.run("print(rand())")), float(kern.run("print(rand())"))
    r2, k2 = float(repl.run("print(rand())")), float(kern.run("print(rand())"))
    one, two = np.random.default_rng(1), np.random.default_rng(2)
    assert [r1, r2] == pytest.approx([one.random(), one.random()], rel=1e-6)
    assert [k1, k2] == pytest.approx([two.random(), two.random()], rel=1e-6)
    assert (_notes(repl.repl.owner), _notes(kern.session)) == (False, True)
    # and the process default state saw none of it
    assert context.DEFAULT.values.get("dtype", np.float64) is np.float64
    assert context.LIVE["notes"] is True


def test_the_command_line_and_the_docs_runner_keep_their_own_settings():
    torch = _torch()
    page = docrun.fresh_session(io.StringIO())
    first = docrun.run_code('set_dtype("float32")\nseed(5)\nnotes(false)\nx = rand()', "<page>", session=page)
    assert first.error is None
    device = ["--device", "torch:cpu"] if torch else []
    code, out = run_cli(device + ["--dtype", "float64", "-c",
                                  'seed(7)\nnotes(false)\nprint(dtype([1]), device(), rand())'])
    assert code == 0
    dt, dev, draw = out.split()
    assert (dt, dev) == ("float64", "torch:cpu" if torch else _base())
    assert float(draw) == pytest.approx(np.random.default_rng(7).random(), rel=1e-6)
    if torch:       # (--device also sets TAPEML_DEVICE, for its kernel and docs subcommands)
        os.environ.pop("TAPEML_DEVICE", None)
    again = docrun.run_code("print(dtype([1]), device(), rand())", "<page>", session=page)
    g = np.random.default_rng(5)
    g.random()
    assert again.output.split()[:2] == ["float32", _base()]
    assert float(again.output.split()[2]) == pytest.approx(g.random(), rel=1e-6)
    # an example of its own starts clean; the caller's state is untouched
    fresh = docrun.run_code("print(dtype([1]), device())", "<example>")
    assert fresh.output == f"float64 {_base()}"
    assert context.LIVE["notes"] is True and context.LIVE["dtype"] is np.float64


def test_the_command_lines_dtype_and_device_stay_in_its_session():
    code, out = run_cli(["--dtype", "float32", "-c", 'set_dtype("float32")\nprint(dtype([1]))'])
    assert (code, out) == (0, "float32\n")
    assert context.LIVE["dtype"] is np.float64


def test_a_bare_interpreter_refuses_a_bad_device_as_the_command_line_does(monkeypatch):
    from tapeml.array import backend
    from tapeml.evaluator.interpreter import Interpreter
    monkeypatch.setenv("TAPEML_DEVICE", "torch:tpu")
    code, out = run_cli(["-c", "1"])
    assert code == 2
    why = out.split("\n")[0].removeprefix("tapeml: ")
    with context.State():
        with pytest.raises(backend.DeviceError) as info:
            Interpreter()
    assert str(info.value) == why


HOST = """
import numpy as np, warnings, tapeml
before = np.geterr()
s = tapeml.Session()
s.run('x = [1, 0] / [0, 0]\\ny = exp(1000)\\nz = log(0)')
print(s.eval('x'), s["y"], s["z"])
print(np.geterr() == before, before['divide'])
with np.errstate(all='raise'):
    s.run('w = 1 / 0')
    print(np.geterr()['divide'])
with warnings.catch_warnings():
    warnings.simplefilter('error')
    try:
        np.array([1.0]) / np.array([0.0])
        print('no warning')
    except RuntimeWarning:
        print('the host warns')
"""


def test_numpy_error_state_is_tapemls_only_inside_its_calls():
    """From a host program: a Session's runs compute 1/0 quietly, and the host's NumPy error state
    (warn by default, or the host's own errstate) is what it was before and after."""
    out = subprocess.run([sys.executable, "-W", "error", "-c", HOST], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.split("\n")[:4] == ["[inf nan] inf -inf", "True warn", "raise", "the host warns"]


def test_the_command_line_in_process_leaves_numpys_error_state():
    before = np.geterr()
    code, out = run_cli(["-c", "print(1 / 0, log(0))"])
    assert (code, out) == (0, "inf -inf\n")
    assert np.geterr() == before
