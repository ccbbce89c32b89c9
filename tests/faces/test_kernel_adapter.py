"""The kernel's use of ipykernel's private API, isolated in lang/faces/kernel_ipykernel.py, and
the behaviour it gives users: stop-on-error drops the cells queued behind a failed or interrupted
cell (README: Interrupt also drops the queued cells), and a cell sent on seeing the error reply
runs (ipykernel 7's race made it come back `aborted` now and then)."""
from __future__ import annotations

import ast
import os

import pytest

from support import ROOT

PRIVATE = ("_abort_queues", "_post_dummy_stop_aborting_message", "shell_channel_thread", "_aborting",
           "set_subshell_aborting")


def test_only_the_adapter_names_ipykernels_private_methods():
    """Every attribute or name of ipykernel's private API the faces use sits in kernel_ipykernel.py."""
    faces = os.path.join(ROOT, "lang", "faces")
    found = []
    for dirpath, _, files in os.walk(faces):
        for f in files:
            if not f.endswith(".py"):
                continue
            path = os.path.join(dirpath, f)
            tree = ast.parse(open(path, encoding="utf-8").read(), path)
            for node in ast.walk(tree):
                name = (node.attr if isinstance(node, ast.Attribute) else
                        node.name if isinstance(node, ast.FunctionDef) else
                        node.value if isinstance(node, ast.Constant) and isinstance(node.value, str) else None)
                if name in PRIVATE:
                    found.append(os.path.relpath(path, faces))
    assert sorted(set(found)) == ["kernel_ipykernel.py"]


pytest.importorskip("jupyter_client", reason="the kernel tests need the jupyter extra: pip install -e '.[jupyter]'")
pytest.importorskip("ipykernel", reason="the kernel tests need the jupyter extra: pip install -e '.[jupyter]'")

from kernel_support import execute, installed_kernelspec, reply_to, running_kernel, wait_for_output  # noqa: E402

# prints, runs 0.3 s more (the cells sent meanwhile queue behind it), then fails
FAILS_LATER = 'print("running")\nt = clock()\nwhile clock() - t < 0.3\nend\nundefined_name'
LOOP = "n = 0\nwhile true\n    n = n + 1\n    if n == 1\n        print(\"running\")\n    end\nend"


@pytest.fixture(scope="module")
def kernel(tmp_path_factory):
    with installed_kernelspec(tmp_path_factory.mktemp("prefix")):
        with running_kernel() as kernel:
            yield kernel


def test_an_error_drops_the_queued_cells_and_the_next_cell_runs(kernel):
    """A failing cell with two cells queued behind it: both are aborted; the cell sent on seeing
    the error reply runs, every time (the race the adapter removes)."""
    km, kc = kernel
    for i in range(5):
        failing = kc.execute(FAILS_LATER)
        wait_for_output(kc, failing, "running\n")     # the cell runs: the next two queue behind it
        queued = [kc.execute(f"queued{i} = {k}") for k in range(2)]
        reply = reply_to(kc, failing)
        assert reply["status"] == "error" and reply["ename"] == "NameError"
        assert [reply_to(kc, q)["status"] for q in queued] == ["aborted", "aborted"]
        reply, out = execute(kc, f"{i} + 1")          # sent on seeing the replies: it runs
        assert reply["status"] == "ok" and out[0][1]["data"]["text/plain"] == str(i + 1)
    reply, _ = execute(kc, "queued0")
    assert reply["ename"] == "NameError"


def test_an_interrupt_drops_the_queued_cells_and_the_next_cell_runs(kernel):
    km, kc = kernel
    execute(kc, "kept = 41")
    for i in range(2):
        running = kc.execute(LOOP)
        wait_for_output(kc, running, "running\n")
        queued = [kc.execute(f"dropped{i} = {k}") for k in range(2)]
        km.interrupt_kernel()
        reply = reply_to(kc, running)
        assert reply["status"] == "error" and reply["ename"] == "KeyboardInterrupt"
        for q in queued:
            r = reply_to(kc, q)
            assert r["status"] == "aborted" or r["ename"] == "KeyboardInterrupt"
        reply, out = execute(kc, f"kept + {i}")
        assert reply["status"] == "ok" and out[0][1]["data"]["text/plain"] == str(41 + i)
    reply, _ = execute(kc, "dropped0")
    assert reply["ename"] == "NameError"
