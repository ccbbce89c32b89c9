"""What the tests share (gradients: tests/fd.py; kernel requests: tests/kernel_support.py).

- tapeml source run in process, each helper named by what it gives back: the interpreter it ran
  in (`run`), what it printed (`output_of`), the language error it raised (`error_of`), its
  variables when it ended (`variables_after`), the value of an expression (`value_of`), how
  print writes one (`printed`), what the REPL would echo (`echoed`); an example program run in
  process with its arguments (`run_example`);
- the command line in process (`run_cli`, `run_ml`, `cli_output`, `cli_error`) and as a
  subprocess (`TAPEML`, `run_file`, `tapeml_command`);
- the real `tapeml` in a pseudo-terminal (`Terminal`);
- a time bound on one run (`time_limit`, raising `Hang`: the fuzz's and cross_device.py's), a
  memory bound (`allocates_at_most`) and a throwaway builtin's docs page
  (`page_of_square_with_vjp`).

Every in-process run uses a fresh Interpreter unless one is given, and the file name <test>
unless `filename=` names one (a program's relative paths start at its file's folder);
`**variables` are set as the program's variables before it runs (so no program variable can be
called interp, filename or setup here)."""
from __future__ import annotations

import contextlib
import io
import os
import re
import shutil
import signal
import subprocess
import sys
import time

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SHARED = os.path.join(os.path.dirname(ROOT), "shared")
REFERENCE = os.path.join(ROOT, "tests", "reference")   # the PyTorch fixtures (*.npz) and their writers
FILENAME = "<test>"


# ---- tapeml source in process ------------------------------------------------------------------

class Hang(Exception):
    """A run past its time limit (`time_limit`)."""


@contextlib.contextmanager
def time_limit(seconds: float):
    """Raise Hang in the main thread when the block runs past `seconds` (SIGALRM's timer; the old
    handler is put back): the fuzz's and the cross-device runs' bound on one generated program."""
    def alarm(signum, frame):
        raise Hang(f"the program ran for more than {seconds:g} s")
    old = signal.signal(signal.SIGALRM, alarm)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, old)


def fresh(prelude: bool = True):
    """A new interpreter whose printing goes to a StringIO (prelude=False: no standard library)."""
    from tapeml.evaluator.interpreter import Interpreter
    return Interpreter(out=io.StringIO(), load_prelude=prelude)


def run(source: str, interp=None, *, filename: str = FILENAME, **variables):
    """Run `source` in `interp` (a fresh one by default) with `variables` set first; return the
    interpreter. Its `out` is a new StringIO holding what this run printed."""
    interp = interp if interp is not None else fresh()
    interp.out = io.StringIO()
    for name, value in variables.items():
        interp.set_variable(name, on_session_device(value))
    interp.run(source, filename)
    return interp


def on_session_device(value, depth=0):
    """NumPy arrays (also inside tuples and Records, 50 deep: the nesting tests' values go in as
    they are) on the session's device, as the Python API brings values in (under `pytest --device
    torch:cpu`); other values as they are."""
    import numpy as np
    from tapeml.array import backend as B
    from tapeml.array.values import Record
    be = B.current()
    if be is B.NUMPY or depth > 50:
        return value
    if type(value) is np.ndarray:
        return be.asarray(value)
    if type(value) is tuple:
        return tuple(on_session_device(v, depth + 1) for v in value)
    if isinstance(value, Record):
        return Record({k: on_session_device(v, depth + 1) for k, v in value.fields.items()})
    return value


def output_of(source: str, interp=None, **options) -> str:
    """What the program printed."""
    return run(source, interp, **options).out.getvalue()


def error_of(source: str, interp=None, **options):
    """The language error the program raised (the test fails when it raises none)."""
    from tapeml.syntax.errors import LangError
    with pytest.raises(LangError) as info:
        run(source, interp, **options)
    return info.value


def variables_after(source: str, interp=None, **options) -> dict:
    """The program's variables (name -> value) when it ended; matrices on another device come back
    as NumPy arrays (as the Python API gives them)."""
    return {k: on_host(v) for k, v in run(source, interp, **options).variables().items()}


def on_host(value, depth=0):
    """Another backend's matrices (also inside tuples and Records) as NumPy arrays; other values
    as they are (the inverse of on_session_device)."""
    from tapeml.array import backend as B
    from tapeml.array.values import Record
    if type(value) in B.ARRAYS:
        return B.to_numpy(value)
    if depth > 50:
        return value
    if type(value) is tuple:
        return tuple(on_host(v, depth + 1) for v in value)
    if isinstance(value, Record):
        return Record({k: on_host(v, depth + 1) for k, v in value.fields.items()})
    return value


def value_of(expr: str, setup: str = "", interp=None, **variables):
    """The value of the expression `expr`, after the statements `setup`: the program
    `setup` newline `result = expr`."""
    from tapeml.array.tape import raw
    source = f"result = {expr}"
    return raw(variables_after(f"{setup}\n{source}" if setup else source, interp, **variables)["result"])


def printed(expr: str, setup: str = "") -> str:
    """What print(expr) writes after the statements `setup`, without its newline."""
    source = f"print({expr})"
    return output_of(f"{setup}\n{source}" if setup else source).rstrip("\n")


def run_example(name: str, *args: str):
    """Run examples/<name> in process with ARGS = args, under its own path (its relative paths are
    its folder's); return the interpreter, whose `out` holds what it printed."""
    path = os.path.join(ROOT, "examples", name)
    interp = fresh()
    interp.set_arguments(args)
    with open(path, encoding="utf-8") as f:
        return run(f.read(), interp, filename=path)


def echoed(source: str, interp=None) -> list:
    """The values the REPL would echo for `source`, in order."""
    got = []
    (interp if interp is not None else fresh()).run(source, FILENAME, echo=got.append)
    return got


# ---- the command line --------------------------------------------------------------------------

def run_cli(args):
    """Run the tapeml command line in process; return (exit code, stdout and stderr together)."""
    from tapeml.faces import cli
    buf = io.StringIO()
    with contextlib.redirect_stdout(buf), contextlib.redirect_stderr(buf):
        code = cli.main(list(args))
    return code, buf.getvalue()


def run_ml(source: str):
    """`tapeml -c source` in process; return (exit code, everything it wrote)."""
    return run_cli(["-c", source])


def cli_output(source: str) -> str:
    """What `tapeml -c source` wrote; the run must succeed (exit 0)."""
    code, out = run_ml(source)
    assert code == 0, out
    return out


def cli_error(source: str) -> str:
    """What `tapeml -c source` wrote for a program that fails: exit 1 and no Python traceback."""
    code, out = run_ml(source)
    assert code == 1, out
    assert "Traceback" not in out
    return out


TAPEML = [sys.executable, "-m", "tapeml.faces.cli"]     # the command line as a subprocess


def run_file(tmp_path, source: str, *args: str, timeout: float = 240):
    """`tapeml [args] prog.ml` in a subprocess, in tmp_path where prog.ml holds `source`
    (the timeout guards against a hang; it is not a timing)."""
    (tmp_path / "prog.ml").write_text(source, encoding="utf-8")
    return subprocess.run(TAPEML + [*args, "prog.ml"], capture_output=True, text=True, timeout=timeout,
                          cwd=tmp_path)


def tapeml_command() -> list[str]:
    """The installed `tapeml` command (the console script of this Python), else `python -m`."""
    exe = os.path.join(os.path.dirname(sys.executable), "tapeml")
    if os.path.exists(exe):
        return [exe]
    found = shutil.which("tapeml")
    return [found] if found else TAPEML


# ---- the real tapeml in a pseudo-terminal ------------------------------------------------------

PROMPT = rb"ml>"
HANG = 60.0         # seconds before a wait gives up: a guard against a hang, never a timing


class Terminal:
    """The real `tapeml [args]` in a pseudo-terminal (stdlib pty; pexpect is not needed): the
    terminal is its controlling one, so b"\\x03" is SIGINT. History goes to tmp_path/history;
    `size=(rows, columns)` sets the terminal's size before tapeml starts. Use it in a `with`:
    the process is killed on the way out unless it ended."""

    def __init__(self, tmp_path, *args: str, size: tuple[int, int] | None = None):
        import pty
        env = dict(os.environ, TERM="xterm", PROMPT_TOOLKIT_NO_CPR="1", TAPEML_HISTORY=str(tmp_path / "history"))
        env.pop("NO_COLOR", None)
        if size:
            env.pop("COLUMNS", None)
            env.pop("LINES", None)
        command = tapeml_command() + list(args)
        self.started = time.monotonic()
        self.pid, self.fd = pty.fork()
        if self.pid == 0:       # the child
            try:
                if size:
                    import fcntl
                    import struct
                    import termios
                    fcntl.ioctl(0, termios.TIOCSWINSZ, struct.pack("HHHH", size[0], size[1], 0, 0))
                os.execve(command[0], command, env)
            finally:
                os._exit(127)
        self.buf = b""
        self.pos = 0
        self.status = None

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def expect(self, pattern: bytes, timeout: float = HANG):
        """Read until `pattern` (a bytes regex) matches the output after the previous match."""
        import select
        end = time.monotonic() + timeout
        while True:
            m = re.compile(pattern).search(self.buf, self.pos)
            if m:
                self.pos = m.end()
                return m
            if time.monotonic() > end:
                break
            r, _, _ = select.select([self.fd], [], [], 0.05)
            if r:
                try:
                    data = os.read(self.fd, 65536)
                except OSError:
                    break
                if not data:
                    break
                self.buf += data
        unread = self.buf[self.pos:]
        raise AssertionError(f"no {pattern!r} in the output (waited up to {timeout:g}s against a hang); "
                             f"output{' (its end)' if len(unread) > 4000 else ''}: {unread[-4000:]!r}")

    def send(self, keys: bytes) -> None:
        os.write(self.fd, keys)

    def exit_code(self, timeout: float = HANG) -> int:
        """Wait for tapeml to end; its exit status."""
        end = time.monotonic() + timeout
        while self.status is None:
            pid, status = os.waitpid(self.pid, os.WNOHANG)
            if pid:
                self.status = os.waitstatus_to_exitcode(status)
            elif time.monotonic() > end:
                raise AssertionError(f"tapeml did not end (waited {timeout:g}s against a hang)")
            else:
                time.sleep(0.05)
        return self.status

    def close(self) -> None:
        if self.status is None:
            try:
                os.kill(self.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            try:
                os.waitpid(self.pid, 0)
            except ChildProcessError:
                pass
        os.close(self.fd)


# ---- memory, and a throwaway builtin -----------------------------------------------------------

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
