"""The Jupyter kernel (lang/faces/kernel.py): a real kernel started through jupyter_client, the
messages it answers, the jupyter_kernel_test conformance suite, and the example notebook run
with nbclient. One kernel serves the round-trip tests of this module (a start is ~1 s)."""
from __future__ import annotations

import base64
import copy
import json
import os

import pytest

pytest.importorskip("jupyter_client", reason="the kernel tests need the jupyter extra: pip install -e '.[jupyter]'")
pytest.importorskip("ipykernel", reason="the kernel tests need the jupyter extra: pip install -e '.[jupyter]'")

from kernel_support import execute, installed_kernelspec, reply_to, running_kernel, wait_for_output  # noqa: E402,F401
from support import ROOT, error_of  # noqa: E402
from tapeml.faces import kernel as K  # noqa: E402
from tapeml.syntax.errors import LangError, render                         # noqa: E402

NOTEBOOK = os.path.join(ROOT, "examples", "tutorial.ipynb")
PNG = b"\x89PNG\r\n\x1a\n"


@pytest.fixture(scope="module")
def kernelspec_path(tmp_path_factory):
    """The kernelspec installed by `tapeml kernel install --prefix DIR`, found through JUPYTER_PATH."""
    with installed_kernelspec(tmp_path_factory.mktemp("prefix")) as path:
        yield path


@pytest.fixture(scope="module")
def kernel(kernelspec_path):
    with running_kernel() as kernel:
        yield kernel


def request(kc, method, *args):
    msg_id = getattr(kc, method)(*args)
    reply = kc.get_shell_msg(timeout=30)
    while reply["parent_header"].get("msg_id") != msg_id:
        reply = kc.get_shell_msg(timeout=30)
    return reply["content"]


# ---- installation --------------------------------------------------------------------------------

def test_install_writes_a_kernelspec_that_runs_this_python(kernelspec_path):
    with open(os.path.join(kernelspec_path, "kernels", "tapeml", "kernel.json")) as f:
        spec = json.load(f)
    import sys
    assert spec["argv"] == [sys.executable, "-m", "tapeml.faces.kernel", "-f", "{connection_file}"]
    assert spec["display_name"] == "tapeml" and spec["language"] == "tapeml"


def test_install_options_are_checked(ml):
    code, out = ml("")      # warm-up: the in-process CLI
    from support import run_cli
    code, out = run_cli(["kernel", "install", "--user", "--prefix", "/nonexistent"])
    assert code == 2 and "exclude each other" in out
    code, out = run_cli(["kernel", "install", "--bogus"])
    assert code == 2 and "unknown option '--bogus'" in out
    for flag in ("--prefix", "--name", "--threads", "--device"):    # the last word, its value missing
        code, out = run_cli(["kernel", "install", flag])
        assert code == 2 and f"option '{flag}' needs a value" in out and "usage: tapeml kernel install" in out
    code, out = run_cli(["kernel"])
    assert code == 2 and "tapeml kernel install" in out


def test_install_sys_prefix_goes_into_the_environment(tmp_path, monkeypatch):
    import sys
    monkeypatch.setattr(sys, "prefix", str(tmp_path))
    assert K.main(["install", "--sys-prefix"]) == 0
    assert os.path.isfile(tmp_path / "share" / "jupyter" / "kernels" / "tapeml" / "kernel.json")


# ---- the messages --------------------------------------------------------------------------------

def test_kernel_info_language(kernel):
    km, kc = kernel
    info = request(kc, "kernel_info")["language_info"]
    assert info["name"] == "tapeml" and info["file_extension"] == ".ml"
    assert info["pygments_lexer"] == "tapeml" and info["mimetype"] == "text/x-tapeml"


def test_print_is_a_stream_and_the_last_value_has_text_and_html(kernel):
    km, kc = kernel
    reply, out = execute(kc, 'x = [1, 2.5; -3, 4]\nprint("hi", 2)\nx')
    assert reply["status"] == "ok"
    assert out[0] == ("stream", {"name": "stdout", "text": "hi 2\n"})
    kind, content = out[1]
    assert kind == "execute_result" and len(out) == 2
    assert content["data"]["text/plain"] == "2x2 matrix:\n  1  2.5\n -3  4"
    page = content["data"]["text/html"]
    assert "<caption>2x2 matrix</caption>" in page
    assert "<tr><td>1</td><td>2.5</td></tr>" in page and "<tr><td>-3</td><td>4</td></tr>" in page


def test_a_number_has_text_only_and_semicolon_silences(kernel):
    km, kc = kernel
    reply, out = execute(kc, "1 + 2")
    assert out == [("execute_result", {"execution_count": reply["execution_count"],
                                       "data": {"text/plain": "3"}, "metadata": {}})]
    reply, out = execute(kc, "5;")
    assert reply["status"] == "ok" and out == []
    reply, out = execute(kc, "ans")          # the last echoed value, not the silenced one
    assert out[0][1]["data"]["text/plain"] == "3"


def test_large_matrix_html_is_truncated_with_its_shape():
    import numpy as np
    page = K.html_value(np.arange(100 * 50, dtype=float).reshape(100, 50))
    assert "<caption>100x50 matrix</caption>" in page
    rows = page.count("<tr>")
    assert rows == K.HTML_MAX_ROWS and "⋮" in page and "…" in page and "⋱" in page
    assert page.split("<tr>")[1].count("<td>") == K.HTML_MAX_COLS
    assert "<td>4999</td>" in page and "<td>0</td>" in page and "<td>2500</td>" not in page


def test_record_html_lists_fields_with_shapes(kernel):
    km, kc = kernel
    reply, out = execute(kc, 'w = {weight = zeros(3, 4), bias = zeros(4), name = "dense"}\nw')
    data = out[0][1]["data"]
    assert "<caption>record, 3 fields</caption>" in data["text/html"]
    assert "<tr><td>weight</td><td>3x4 matrix</td></tr>" in data["text/html"]
    assert "<tr><td>name</td><td>&quot;dense&quot;</td></tr>" in data["text/html"]


def test_error_reply_is_the_cli_message(kernel):
    km, kc = kernel
    code = "y = [1, 2, 3]\ny + [1, 2]"
    reply, out = execute(kc, code)
    assert reply["status"] == "error" and reply["ename"] == "ShapeError"
    name = f"In[{reply['execution_count']}]"
    err = error_of(code, filename=name)
    assert reply["evalue"] == err.message
    assert reply["traceback"] == render(err, {name: code}).split("\n")
    assert reply["traceback"][0].startswith(f"{name}:2:3: ShapeError: ")
    assert reply["traceback"][-1].strip() == "|   ^"
    assert out == [("error", {k: reply[k] for k in ("ename", "evalue", "traceback", "execution_count")})]
    assert not any("Traceback" in line for line in reply["traceback"])
    reply, out = execute(kc, "y")             # the variables set before the error are kept
    assert out[0][1]["data"]["text/plain"] == "[1, 2, 3]"


def test_profile_cell_prints_the_tables_after_the_cell_and_keeps_line_numbers(kernel, tmp_path):
    km, kc = kernel
    path = tmp_path / "cell.json"
    reply, out = execute(kc, f"%%profile {path}\nw = [1, 2; 3, 4]\ng = grad(fn(w) -> sum(w @ w), w)\ng[0, 0]")
    assert reply["status"] == "ok"
    assert out[0][0] == "execute_result" and out[0][1]["data"]["text/plain"] == "7"
    text = "".join(c["text"] for kind, c in out if kind == "stream")
    assert text.startswith("profile: ") and f"In[{reply['execution_count']}]:3 " in text
    assert "  operator @ " in text and f"profile written to {path}" in text
    assert path.exists()
    reply, out = execute(kc, "%%profile\nx = 1\ny = [1, 2] @ [1]")
    assert reply["status"] == "error" and reply["traceback"][0].startswith(f"In[{reply['execution_count']}]:3:")
    assert any(kind == "stream" and "by source line" in c["text"] for kind, c in out)
    reply, out = execute(kc, f"%%profile {tmp_path / 'none.json'}\nx = 1 +")    # ran nothing: no table, no file
    assert reply["status"] == "error" and reply["ename"] == "SyntaxError"
    assert not any(kind == "stream" and "profile" in c["text"] for kind, c in out)
    assert not (tmp_path / "none.json").exists()
    reply, out = execute(kc, "x + 1")         # the profiler is off again, the variables kept
    assert out == [("execute_result", {"execution_count": reply["execution_count"],
                                       "data": {"text/plain": "2"}, "metadata": {}})]
    reply, out = execute(kc, "show_tape(fn(x) -> sum(x * 2), [1, 2])")      # the picture, inline
    pngs = [c["data"]["image/png"] for kind, c in out if kind == "display_data"]
    assert reply["status"] == "ok" and len(pngs) == 1 and base64.b64decode(pngs[0]).startswith(PNG)


def test_figures_are_inline_pngs_one_each_none_left_open(kernel):
    km, kc = kernel
    reply, out = execute(kc, "plot([1, 2, 3])\nshow()\nhist([1, 2, 2, 3])")
    assert reply["status"] == "ok"
    pngs = [c["data"]["image/png"] for kind, c in out if kind == "display_data"]
    assert len(pngs) == 2 and len(out) == 2
    assert all(base64.b64decode(p).startswith(PNG) for p in pngs)
    assert pngs[0] != pngs[1]                 # two figures, not one drawn twice
    reply, out = execute(kc, "title(\"alone\")")
    assert len([1 for kind, _ in out if kind == "display_data"]) == 1   # a fresh figure
    reply, out = execute(kc, "1;")
    assert out == []                          # nothing was left open
    reply, out = execute(kc, "plot([1, 2])\nnosuch(1)")     # an error: the figure still shows
    assert reply["status"] == "error" and [k for k, _ in out] == ["display_data", "error"]
    reply, out = execute(kc, "1;")
    assert out == []


def test_progress_bars_are_plain_lines(kernel):
    km, kc = kernel
    reply, out = execute(kc, "for i in progress(1:3, \"steps\")\n    i;\nend")
    assert reply["status"] == "ok"
    text = "".join(c["text"] for kind, c in out if kind == "stream" and c["name"] == "stderr")
    assert "steps" in text and "3/3" in text and "\r" not in text


def test_completion_names_fields_and_signatures(kernel):
    km, kc = kernel
    execute(kc, "weights = {wq = zeros(2, 2), wk = zeros(2, 2), bias = 1}")
    reply = request(kc, "complete", "weights.w", len("weights.w"))
    assert reply["matches"] == ["wq", "wk"]            # in the record's order
    assert reply["cursor_start"] == len("weights.") and reply["cursor_end"] == len("weights.w")
    reply = request(kc, "complete", "y = softm", 9)
    assert "softmax" in reply["matches"] and reply["cursor_start"] == 4
    types = reply["metadata"]["_jupyter_types_experimental"]
    assert any(t["text"] == "softmax" and t["signature"].startswith("softmax(x") for t in types)
    reply = request(kc, "complete", "weig", 4)
    assert reply["matches"] == ["weights"]


def test_inspection_is_the_help_page(kernel):
    km, kc = kernel
    from tapeml.builtins.help import help_text
    from tapeml.evaluator.interpreter import Interpreter
    reply = request(kc, "inspect", "y = softmax(x)", len("y = soft"))
    assert reply["found"] is True
    assert reply["data"]["text/plain"] == help_text("softmax", Interpreter())
    assert "[0.09003057, 0.2447285, 0.665241]" in reply["data"]["text/plain"]    # its example ran
    reply = request(kc, "inspect", "nosuchname", 3)
    assert reply["found"] is False
    reply, out = execute(kc, "?relu")
    assert reply["status"] == "ok" and reply["payload"][0]["data"]["text/plain"] == help_text("relu", Interpreter())


@pytest.mark.parametrize("code, status", [
    ("fn f(x)", "incomplete"), ("for i in 1:3", "incomplete"), ("x = [1, 2", "incomplete"),
    ("f(1,", "incomplete"), ("x = 1", "complete"), ("fn f(x)\n    x\nend", "complete"),
    ("x = )", "invalid"),
])
def test_is_complete(kernel, code, status):
    km, kc = kernel
    assert request(kc, "is_complete", code)["status"] == status


LOOP = "n = 0\nwhile true\n    n = n + 1\n    if n == 1\n        print(\"running\")\n    end\nend"


def interrupted(reply):
    return reply["status"] == "error" and reply["ename"] == "KeyboardInterrupt"


def test_interrupt_stops_the_cell_and_keeps_the_variables(kernel):
    km, kc = kernel
    execute(kc, "kept = 41")
    msg_id = kc.execute(LOOP)
    wait_for_output(kc, msg_id, "running\n")          # the loop runs: n >= 1
    km.interrupt_kernel()
    reply = reply_to(kc, msg_id)
    assert interrupted(reply) and reply["evalue"] == "interrupted; the variables set so far are kept"
    reply, out = execute(kc, "[kept + 1, n > 0]")     # the next cell runs, the variables are kept
    assert reply["status"] == "ok" and out[0][1]["data"]["text/plain"] == "[42, 1]"


def test_interrupt_sent_right_after_the_request_stops_that_cell(kernel):
    """The interrupt may reach the kernel before the request, while it is dispatched, or once
    the cell runs: each way the cell stops and the next one runs."""
    km, kc = kernel
    execute(kc, "kept = 41")
    for i in range(3):
        msg_id = kc.execute(LOOP)
        km.interrupt_kernel()
        assert interrupted(reply_to(kc, msg_id))
        reply, out = execute(kc, f"kept + {i}")
        assert reply["status"] == "ok" and out[0][1]["data"]["text/plain"] == str(41 + i)


def test_interrupt_that_overtakes_its_request_stops_the_cell_before_it_starts(kernel):
    """The request is stamped, then the interrupt sent; the kernel gets the interrupt first
    (the kernel_info round trip makes sure it has), then the request: the cell does not start."""
    km, kc = kernel
    execute(kc, "kept = 41")
    msg = kc.session.msg("execute_request", {"code": "never_set = 1\n" + LOOP, "silent": False,
                                             "store_history": True, "user_expressions": {},
                                             "allow_stdin": False, "stop_on_error": True})
    km.interrupt_kernel()
    request(kc, "kernel_info")
    kc.shell_channel.send(msg)
    reply = reply_to(kc, msg["header"]["msg_id"])
    assert interrupted(reply) and reply["evalue"] == "interrupted before the cell started; nothing ran"
    reply, out = execute(kc, "never_set")             # nothing of the cell ran
    assert reply["status"] == "error" and reply["ename"] == "NameError"
    reply, out = execute(kc, "kept + 1")
    assert reply["status"] == "ok" and out[0][1]["data"]["text/plain"] == "42"


def test_interrupt_while_idle_stops_nothing_sent_after_it(kernel):
    km, kc = kernel
    execute(kc, "kept = 41")
    km.interrupt_kernel()
    request(kc, "kernel_info")                        # the kernel has had the interrupt
    reply, out = execute(kc, "kept + 1")
    assert reply["status"] == "ok" and out[0][1]["data"]["text/plain"] == "42"
    reply = request(kc, "complete", "kep", 3)        # nor a request of another kind
    assert reply["status"] == "ok" and reply["matches"] == ["kept"]


def test_interrupt_stops_the_cells_queued_behind_the_running_one(kernel):
    """Sent before the interrupt, a queued cell never runs: stop-on-error aborts it, or, when it
    reached the kernel after the interrupted cell's reply, it does not start."""
    km, kc = kernel
    execute(kc, "kept = 41")
    running = kc.execute(LOOP)
    wait_for_output(kc, running, "running\n")
    queued = kc.execute("queued = 1")
    km.interrupt_kernel()
    assert interrupted(reply_to(kc, running))
    reply = reply_to(kc, queued)
    assert reply["status"] == "aborted" or interrupted(reply)
    reply, out = execute(kc, "queued")
    assert reply["status"] == "error" and reply["ename"] == "NameError"
    reply, out = execute(kc, "kept + 1")
    assert reply["status"] == "ok" and out[0][1]["data"]["text/plain"] == "42"


# ---- the example notebook ------------------------------------------------------------------------

def test_tutorial_notebook_runs_with_the_stored_outputs(kernelspec_path):
    nbformat = pytest.importorskip("nbformat", reason="the notebook test needs nbformat")
    nbclient = pytest.importorskip("nbclient", reason="the notebook test needs nbclient")
    stored = nbformat.read(NOTEBOOK, as_version=4)
    nb = copy.deepcopy(stored)
    for cell in nb.cells:
        if cell.cell_type == "code":
            cell.outputs = []
    nbclient.NotebookClient(nb, kernel_name="tapeml", timeout=60).execute()

    def summary(cell):
        out = []
        for o in cell.outputs:
            if o.output_type == "stream":
                out.append((o.output_type, o.name, o.text))
            elif o.output_type == "error":
                out.append((o.output_type, o.ename, o.evalue))
            else:
                data = dict(o.data)
                if "image/png" in data:
                    assert base64.b64decode(data.pop("image/png")).startswith(PNG)
                    data["image/png"] = "a PNG"        # images by presence
                out.append((o.output_type, data))
        return out

    code = [(s, n) for s, n in zip(stored.cells, nb.cells) if s.cell_type == "code"]
    assert len(code) >= 6
    assert any("image/png" in o.get("data", {}) for s, _ in code for o in s.outputs)
    for s, n in code:
        assert summary(n) == summary(s), s.source


def test_tutorial_notebook_outputs_match_the_tutorial_text():
    """The notebook's echoes are the tutorial page's ```text blocks (docs/tutorial.md)."""
    nbformat = pytest.importorskip("nbformat", reason="the notebook test needs nbformat")
    import re
    with open(os.path.join(ROOT, "docs", "tutorial.md"), encoding="utf-8") as f:
        page = f.read()
    blocks = re.findall(r"^```ml\n(.*?)^```\n(?:\n```text\n(.*?)^```\n)?", page, re.M | re.S)
    expected = {src.rstrip("\n"): text for src, text in blocks}
    nb = nbformat.read(NOTEBOOK, as_version=4)
    checked = 0
    for cell in nb.cells:
        if cell.cell_type != "code":
            continue
        text = "".join(o.data["text/plain"] + "\n" for o in cell.outputs if o.output_type == "execute_result")
        assert text == expected[cell.source], cell.source
        checked += 1
    assert checked >= 6


# ---- the conformance suite -----------------------------------------------------------------------

try:
    import jupyter_kernel_test as _jkt
except ImportError:          # pragma: no cover - the dev extra installs it
    _jkt = None


if _jkt is not None:
    class TestConformance(_jkt.KernelTests):
        """jupyter_kernel_test's KernelTests (the Jupyter project's suite for kernel authors)."""
        kernel_name = "tapeml"
        language_name = "tapeml"
        file_extension = ".ml"
        code_hello_world = 'print("hello, world")'
        code_stderr = "for i in progress(1:2)\n    i;\nend"
        completion_samples = [{"text": "softm", "matches": {"softmax"}}]
        complete_code_samples = ["x = 1", "fn f(x)\n    x\nend"]
        incomplete_code_samples = ["fn f(x)", "x = [1, 2"]
        invalid_code_samples = ["x = )"]
        code_page_something = "?softmax"
        code_generate_error = "undefined_name + 1"
        code_execute_result = [{"code": "1 + 2", "result": "3"}, {"code": "[1, 2]", "result": "[1, 2]"}]
        code_display_data = [{"code": "plot([1, 2, 3])\nshow()", "mime": "image/png"}]
        code_inspect_sample = "softmax"
        supported_history_operations = ()      # the kernel keeps no history database

        @classmethod
        def setUpClass(cls):
            import tempfile
            cls._prefix = tempfile.TemporaryDirectory()
            assert K.main(["install", "--prefix", cls._prefix.name]) == 0
            cls._old_path = os.environ.get("JUPYTER_PATH")
            os.environ["JUPYTER_PATH"] = os.path.join(cls._prefix.name, "share", "jupyter")
            super().setUpClass()

        @classmethod
        def tearDownClass(cls):
            super().tearDownClass()
            if cls._old_path is None:
                os.environ.pop("JUPYTER_PATH", None)
            else:
                os.environ["JUPYTER_PATH"] = cls._old_path
            cls._prefix.cleanup()
else:                        # pragma: no cover
    def test_conformance_suite():
        pytest.skip("jupyter_kernel_test is not installed (pip install -e '.[dev]' installs it)")
