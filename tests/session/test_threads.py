"""BLAS threads (issue 28, item 4): one thread by default on every face, `tapeml --threads N`,
TAPEML_THREADS, a count the environment already gives BLAS kept, `Session(threads=)` around the
Session's computations only, and the kernel's `install --threads`. What each count costs is
measured, not tested (tests/perf/threads.py)."""
import io
import os
import subprocess
import sys

import pytest

import tapeml
from tapeml.array import threads
from tapeml.faces import kernel
from support import ROOT, run_cli

BLAS_ENV = threads.BLAS_VARIABLES + ("TAPEML_THREADS",)
PROBE = ("import sys; from tapeml.faces import cli; code = cli.main(sys.argv[1:]); "
         "from tapeml.array import threads; print('threads', threads.current(), 'exit', code)")


def probe(*args, **env):
    """The BLAS thread count after the command line ran `args` (in a fresh process)."""
    base = {k: v for k, v in os.environ.items() if k not in BLAS_ENV}
    r = subprocess.run([sys.executable, "-c", PROBE, *args], capture_output=True, text=True, cwd=ROOT,
                       env=dict(base, TAPEML_PROGRESS="off", **env), timeout=120)
    return r.stdout.strip().splitlines()[-1] if r.stdout.strip() else "", r.stderr


@pytest.fixture
def restore_count():
    before = threads.current()
    yield before
    threads.set_threads(before)


def test_the_command_line_runs_blas_on_one_thread_unless_told():
    assert probe("-c", "1")[0] == "threads 1 exit 0"
    assert probe("--threads", "2", "-c", "1")[0] == "threads 2 exit 0"
    assert probe("--threads=3", "-c", "1")[0] == "threads 3 exit 0"
    assert probe("-c", "1", TAPEML_THREADS="2")[0] == "threads 2 exit 0"
    assert probe("--threads", "3", "-c", "1", TAPEML_THREADS="2")[0] == "threads 3 exit 0"    # the flag wins
    # a count the environment already gives BLAS is the user's: kept
    assert probe("-c", "1", OPENBLAS_NUM_THREADS="2")[0] == "threads 2 exit 0"


@pytest.mark.parametrize("args, env, message", [
    (["--threads", "0", "-c", "1"], {}, "--threads needs a whole number >= 1, got '0'"),
    (["--threads=two", "-c", "1"], {}, "--threads needs a whole number >= 1, got 'two'"),
    (["--threads=1.5", "-c", "1"], {}, "--threads needs a whole number >= 1, got '1.5'"),
    (["--threads"], {}, "--threads needs a whole number >= 1"),
    (["-c", "1"], {"TAPEML_THREADS": "-1"}, "TAPEML_THREADS needs a whole number >= 1, got '-1'"),
])
def test_a_bad_count_is_a_usage_error(args, env, message, monkeypatch, restore_count):
    for k, v in env.items():
        monkeypatch.setenv(k, v)
    code, out = run_cli(args)
    assert code == 2
    assert out.startswith(f"tapeml: {message}\nusage: tapeml")


def test_help_says_threads_and_its_variable():
    code, out = run_cli(["--help"])
    assert "--threads N" in out and "TAPEML_THREADS" in out and "OPENBLAS_NUM_THREADS" in out


def test_threads_after_the_script_name_are_the_scripts_arguments_with_a_warning(restore_count):
    code, out = run_cli(["-c", "print(ARGS)", "--threads", "2"])
    assert code == 0
    assert "'--threads' comes after the script" in out and '("--threads", "2")' in out


def test_a_session_runs_on_its_count_and_puts_the_hosts_back(restore_count, monkeypatch):
    for k in BLAS_ENV:
        monkeypatch.delenv(k, raising=False)
    threads.set_threads(2)
    seen = []

    class Out(io.StringIO):
        def write(self, text):
            seen.append(threads.current())      # while the program prints: inside the Session's method
            return super().write(text)
    s = tapeml.Session(out=Out(), threads=3)
    s.run("fn show(x)\n  print(x)\n  return x\nend")
    s.run("show(1)")
    s.eval("show(2)")
    s.call("show", 3.0)
    s["show"](4.0)                              # a tapeml function handed to Python
    assert seen == [3, 3, 3, 3]
    assert threads.current() == 2               # the host program's count between them
    d = tapeml.Session(out=Out())               # no count: TAPEML_THREADS, else the environment's, else 1
    d.run("print(5)")
    assert seen[-1] == 1 and threads.current() == 2
    monkeypatch.setenv("TAPEML_THREADS", "4")
    tapeml.Session(out=Out()).run("print(6)")
    assert seen[-1] == 4
    monkeypatch.delenv("TAPEML_THREADS")
    monkeypatch.setenv("OPENBLAS_NUM_THREADS", "2")
    threads.set_threads(3)
    tapeml.Session(out=Out()).run("print(7)")   # the environment's count: left as it is
    assert seen[-1] == 3


def test_a_session_keeps_its_count_through_nested_and_failing_runs(restore_count):
    threads.set_threads(2)
    s = tapeml.Session(out=io.StringIO(), threads=1)
    with pytest.raises(tapeml.LangError):
        s.run("x = [1, 2] @ [1, 2, 3]")
    assert threads.current() == 2
    with threads.limited(3):
        s.run("y = 1")
        assert threads.current() == 3           # the outer block's count is back when the run ends
    assert threads.current() == 2


@pytest.mark.parametrize("bad", [0, -1, 1.5, True, "2"])
def test_a_session_refuses_a_count_that_is_not_a_whole_number_from_1(bad):
    with pytest.raises(ValueError, match="threads must be a whole number >= 1 or None"):
        tapeml.Session(threads=bad)


def test_the_kernel_install_writes_the_count_into_the_kernelspec():
    assert "env" not in kernel.kernel_spec()
    assert kernel.kernel_spec(2)["env"] == {"TAPEML_THREADS": "2"}
    err = io.StringIO()
    import contextlib
    with contextlib.redirect_stderr(err):
        assert kernel.main(["install", "--threads", "0"]) == 2
    assert "--threads needs a whole number >= 1, got '0'" in err.getvalue()
