"""Signals obeyed at any depth (issue 38, item 3): Ctrl-C, SIGTERM and SIGHUP stop a program whose
calls nest deeper than lang/evaluator/stack.py's HOP_DEPTH (the rest of each such call runs on a
deep thread, and Python delivers signals to the main thread only) within LIMIT_S of the signal,
compiled and walked (TAPEML_COMPILE=0), on every face: the command line ("Interrupted (Ctrl-C)",
exit 130; "Terminated (SIGTERM)", 143; SIGHUP 129), a Session (KeyboardInterrupt out of `run`,
the variables kept, the Session usable after), the REPL (the prompt again, the variables kept)
and the notebook kernel (its interrupted reply).

The programs loop for ever over a call that nests DEPTH deep and returns, so the signal finds
them anywhere: on the main thread, in a hand-over, on any deep thread, unwinding. Each prints
"ready" before its loop; the clock starts at the signal (never at the process's start), after
the program has looped for a while. A default run has the short form (1,500 deep, compiled,
SIGINT on the command line and a Session); the sweep over depths, modes, signals and faces is
marked slow."""
from __future__ import annotations

import os
import signal
import subprocess
import time

import pytest

from support import HANG, PROMPT, TAPEML, Terminal


LIMIT_S = 2.0           # from the signal to the exit, the exception or the reply
RUNS_FOR_S = 0.3        # how long a program loops before the signal
DEPTHS = [0, 1500, 19000]
MODES = {"compiled": "1", "walked": "0"}
SAID = {"SIGINT": (130, "Interrupted (Ctrl-C)\n"), "SIGTERM": (143, "Terminated (SIGTERM)\n"),
        "SIGHUP": (129, "Terminated (SIGHUP)\n")}

NEST = "fn r(n)\n    if n == 0\n        return 0\n    end\n    return r(n - 1) + 1\nend\n"


def loop(depth: int) -> str:
    """For ever add the result of a call nesting `depth` deep (r of NEST) to i."""
    return f"i = 0\nwhile true\n    i = i + r({depth})\nend\n"


def looping(depth: int) -> str:
    """A program that prints ready, then loops (loop)."""
    return NEST + 'print("ready")\n' + loop(depth)


def signalled(tmp_path, source: str, sig: str, mode: str = "compiled") -> tuple[int, str, float]:
    """Run `source` with `tapeml`, send it `sig` once it has printed ready and looped a while:
    (exit status, stderr, seconds from the signal to the exit)."""
    path = tmp_path / "prog.ml"
    path.write_text(source)
    env = dict(os.environ, TAPEML_COMPILE=MODES[mode])
    proc = subprocess.Popen(TAPEML + [str(path)], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True, env=env)
    try:
        assert proc.stdout.readline() == "ready\n"
        time.sleep(RUNS_FOR_S)
        start = time.monotonic()
        proc.send_signal(getattr(signal, sig))
        try:
            proc.wait(timeout=HANG)
        except subprocess.TimeoutExpired:
            pytest.fail(f"{sig} did not end the program in {HANG:g}s")
        took = time.monotonic() - start
        return proc.returncode, proc.stderr.read(), took
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        proc.stdout.close()
        proc.stderr.close()


def assert_stopped(tmp_path, source, sig, mode="compiled"):
    code, err, took = signalled(tmp_path, source, sig, mode)
    assert (code, err) == SAID[sig]
    assert took < LIMIT_S, f"{sig} took {took:.2f}s to end the program"
    print(f"{sig} {mode}: {took * 1000:.0f} ms")


# A grad whose tape holds a million nodes when the signal comes: the tape hangs from the
# interrupted frames, and the cyclic collector, turned back on as grad unwinds, once walked all
# of it before the program could say Interrupted (2.1 s after a 6 s grad)
LONG_TAPE = """fn f(w)
    y = w
    for i in 1:100000000
        y = y * 1.000001
        if i == 1000000
            print("ready")
        end
    end
    return sum(y)
end
g = grad(f, [1, 2])
"""


@pytest.mark.slow
@pytest.mark.parametrize("mode", MODES)
def test_ctrl_c_stops_a_grad_with_a_long_tape_at_once(tmp_path, mode):
    assert_stopped(tmp_path, LONG_TAPE, "SIGINT", mode)


# ---- the command line --------------------------------------------------------------------------
def test_ctrl_c_stops_a_loop_whose_body_nests_1500_deep(tmp_path):
    assert_stopped(tmp_path, looping(1500), "SIGINT")


@pytest.mark.slow
@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("sig", ["SIGINT", "SIGTERM"])
@pytest.mark.parametrize("depth", DEPTHS)
def test_a_signal_stops_a_loop_at_any_depth(tmp_path, depth, sig, mode):
    for _ in range(3):          # the signal lands somewhere else each time
        assert_stopped(tmp_path, looping(depth), sig, mode)


@pytest.mark.slow
def test_sighup_stops_a_loop_nesting_19000_deep(tmp_path):
    assert_stopped(tmp_path, looping(19000), "SIGHUP")


# What the deep part does when the signal comes: calls through map, a gradient being recorded, a
# progress bar's loop, NumPy products (each far shorter than LIMIT_S: a single NumPy call is not
# interrupted), and a loop that spins at the bottom of 19,000 calls.
SIBLINGS = {
    "map": "fn m(n)\n    if n == 0\n        return 0\n    end\n    return map(fn(x) -> m(x - 1), [n])[0] + 1\nend\n"
           'print("ready")\nwhile true\n    m(1500)\nend\n',
    "grad": "fn g(x, n)\n    if n == 0\n        return x * x\n    end\n    return g(x, n - 1)\nend\n"
            'print("ready")\nwhile true\n    d = grad(fn(x) -> g(x, 1500), 3)\nend\n',
    "numpy": 'fn q(n)\n    if n == 0\n        a = rand(200, 200)\n        print("ready")\n        while true\n'
             "            b = a @ a\n        end\n    end\n    return q(n - 1)\nend\nq(1500)\n",
    "bottom": 'fn b(n)\n    if n == 0\n        print("ready")\n        while true\n        end\n    end\n'
              "    return b(n - 1)\nend\nb(19000)\n",
}
PROGRESS = {   # (the bar, drawn once on a stderr that is no terminal, comes before the message)
    "progress loop nesting": NEST + 'print("ready")\nfor i in progress(1:100000000, desc="long")\n'
                                    "    k = r(1500)\nend\n",
    "progress loop deep": 'fn p(n)\n    if n == 0\n        print("ready")\n'
                          '        for i in progress(1:100000000, desc="long")\n            k = i\n'
                          "        end\n    end\n    return p(n - 1)\nend\np(1500)\n",
}


@pytest.mark.slow
@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("sig", ["SIGINT", "SIGTERM"])
@pytest.mark.parametrize("what", SIBLINGS)
def test_a_signal_stops_whatever_the_deep_part_does(tmp_path, what, sig, mode):
    assert_stopped(tmp_path, SIBLINGS[what], sig, mode)


@pytest.mark.slow
@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("what", PROGRESS)
def test_ctrl_c_stops_a_progress_loop_at_depth(tmp_path, what, mode):
    code, err, took = signalled(tmp_path, PROGRESS[what], "SIGINT", mode)
    bar, said = err.rsplit("\n", 2)[:2]
    assert (code, said) == (130, "Interrupted (Ctrl-C)") and bar.startswith("long: ")
    assert took < LIMIT_S, f"took {took:.2f}s"


# ---- a Session -------------------------------------------------------------------------------
# In a subprocess, so that a deadlock (as the Session had: 3 of 3 runs) fails the test, never hangs
# the suite. Ctrl-C is _thread.interrupt_main from another thread, as an IDE's stop button sends it.
SESSION = """
import _thread, json, sys, threading, time
import tapeml
compiled = sys.argv[1] == "compiled"
s = tapeml.Session()
s.interp.compiled = compiled
s.run("kept = 5\\n" + sys.argv[2])
sent = []
def interrupt():
    sent.append(time.monotonic())
    _thread.interrupt_main()
threading.Timer(0.5, interrupt).start()
try:
    s.run(sys.argv[3])
    print(json.dumps("returned"))
except KeyboardInterrupt:
    took = time.monotonic() - sent[0]
    print(json.dumps([took, s["kept"], s.interp.depth, s["i"], s.eval("kept + 1"), s.call("r", 1200)]))
"""


def interrupted_session(depth: int, mode: str = "compiled"):
    """A Session running loop(depth), interrupted: [seconds from the interrupt to the
    KeyboardInterrupt out of run, kept, the interpreter's depth, i, kept + 1, r(1200)]."""
    import json
    import sys
    proc = subprocess.run([sys.executable, "-c", SESSION, mode, NEST, loop(depth)],
                          capture_output=True, text=True, timeout=HANG)
    assert proc.returncode == 0 and proc.stderr == "", proc.stderr[-2000:]
    return json.loads(proc.stdout)


def assert_session_interrupted(depth, mode="compiled"):
    took, kept, at, i, after, deep = interrupted_session(depth, mode)
    assert took < LIMIT_S, f"the interrupt took {took:.2f}s"
    assert (kept, at, after, deep) == (5.0, 0, 6.0, 1200.0)        # usable after, deep calls too
    assert i % max(depth, 1) == 0 and (depth == 0 or i > 0)         # whole calls were added
    print(f"Session {depth} {mode}: {took * 1000:.0f} ms")


def test_ctrl_c_stops_a_session_whose_loop_nests_1500_deep():
    assert_session_interrupted(1500)


@pytest.mark.slow
@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("depth", DEPTHS)
def test_ctrl_c_stops_a_session_at_any_depth(depth, mode):
    for _ in range(3):
        assert_session_interrupted(depth, mode)


# ---- the REPL ------------------------------------------------------------------------------------
@pytest.mark.slow
@pytest.mark.parametrize("depth", [1500, 19000])
def test_ctrl_c_in_the_repl_stops_a_deep_loop_and_keeps_the_variables(tmp_path, depth):
    with Terminal(tmp_path) as p:
        p.expect(PROMPT)
        # (the REPL echoes what is typed: the markers printed are split in the source)
        for line in (NEST + 'kept = 42\nprint("def" + "ined")').splitlines():
            p.send(line.strip().encode() + b"\r")
        p.expect(rb"defined\r\n")
        p.expect(PROMPT)
        loop = f'i = 0\nn = 0\nwhile true\nn = n + 1\nif n == 2\nprint("rea" + "dy")\nend\ni = i + r({depth})\nend'
        for line in loop.splitlines():
            p.send(line.encode() + b"\r")
        p.expect(rb"ready\r\n")
        time.sleep(RUNS_FOR_S)
        start = time.monotonic()
        p.send(b"\x03")
        p.expect(rb"Interrupted \(Ctrl-C\)")
        took = time.monotonic() - start
        p.expect(PROMPT)
        p.send(b'print("{kept} {i >= 0 and n >= 2} {r(1200)}")\r')
        p.expect(rb"42 true 1200\r\n")
        p.expect(PROMPT)
        p.send(b"\x04")
        assert p.exit_code() == 0
    assert took < LIMIT_S, f"took {took:.2f}s"
    print(f"REPL {depth}: {took * 1000:.0f} ms")


# ---- the notebook kernel -------------------------------------------------------------------------
@pytest.fixture(scope="module", params=list(MODES))
def kernel(request, tmp_path_factory):
    pytest.importorskip("jupyter_client", reason="the kernel tests need the jupyter extra")
    pytest.importorskip("ipykernel", reason="the kernel tests need the jupyter extra")
    from kernel_support import installed_kernelspec, running_kernel
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("TAPEML_COMPILE", MODES[request.param])       # the kernel's process inherits it
        with installed_kernelspec(tmp_path_factory.mktemp("prefix")), running_kernel() as kernel:
            yield kernel


@pytest.mark.slow
@pytest.mark.parametrize("depth", DEPTHS)
def test_the_kernels_interrupt_stops_a_cell_at_any_depth(kernel, depth):
    from kernel_support import execute
    km, kc = kernel
    reply, _ = execute(kc, f"kept = {depth}\n" + NEST)
    assert reply["status"] == "ok"
    for _ in range(2):
        msg_id = kc.execute('print("ready")\n' + loop(depth))
        while True:
            m = kc.get_iopub_msg(timeout=HANG)
            if m["parent_header"].get("msg_id") == msg_id and m["msg_type"] == "stream":
                assert m["content"]["text"] == "ready\n"
                break
        time.sleep(RUNS_FOR_S)
        start = time.monotonic()
        km.interrupt_kernel()
        reply = kc.get_shell_msg(timeout=HANG)
        while reply["parent_header"].get("msg_id") != msg_id:
            reply = kc.get_shell_msg(timeout=HANG)
        took = time.monotonic() - start
        content = reply["content"]
        assert (content["status"], content["ename"], content["evalue"]) == \
            ("error", "KeyboardInterrupt", "interrupted; the variables set so far are kept")
        assert took < LIMIT_S, f"the interrupt took {took:.2f}s"
        print(f"kernel {depth}: {took * 1000:.0f} ms")
        reply, out = execute(kc, "(kept, i >= 0, r(1200))")
        assert reply["status"] == "ok" and out[-1][1]["data"]["text/plain"] == f"({depth}, true, 1200)"
