"""What the kernel tests share (tests/faces/test_kernel.py, tests/evaluator/test_reentry.py): the kernelspec
installed where Jupyter finds it, a running kernel, and one request to it with what it sent back.
Imports nothing of Jupyter, so a module that uses it can skip its kernel tests when the jupyter
extra is missing."""
import contextlib
import os


@contextlib.contextmanager
def installed_kernelspec(prefix):
    """The kernelspec of `tapeml kernel install --prefix PREFIX`, found through JUPYTER_PATH while
    the block runs; yields that share/jupyter folder."""
    from tapeml.faces import kernel as K
    assert K.main(["install", "--prefix", str(prefix)]) == 0
    path = os.path.join(str(prefix), "share", "jupyter")
    old = os.environ.get("JUPYTER_PATH")
    os.environ["JUPYTER_PATH"] = path
    try:
        yield path
    finally:
        if old is None:
            os.environ.pop("JUPYTER_PATH", None)
        else:
            os.environ["JUPYTER_PATH"] = old


@contextlib.contextmanager
def running_kernel():
    """A started tapeml kernel: (kernel manager, client), shut down after the block."""
    from jupyter_client.manager import start_new_kernel
    km, kc = start_new_kernel(kernel_name="tapeml", startup_timeout=60)
    try:
        yield km, kc
    finally:
        kc.stop_channels()
        km.shutdown_kernel(now=True)


def execute(kc, code, timeout=30):
    """(reply content, [(msg_type, content)] of the iopub messages the request caused)."""
    msg_id = kc.execute(code)
    reply = kc.get_shell_msg(timeout=timeout)
    while reply["parent_header"].get("msg_id") != msg_id:
        reply = kc.get_shell_msg(timeout=timeout)
    out = []
    while True:
        m = kc.get_iopub_msg(timeout=timeout)
        if m["parent_header"].get("msg_id") != msg_id:
            continue
        if m["msg_type"] == "status":
            if m["content"]["execution_state"] == "idle":
                break
            continue
        if m["msg_type"] != "execute_input":
            out.append((m["msg_type"], m["content"]))
    return reply["content"], out


def reply_to(kc, msg_id, timeout=30):
    reply = kc.get_shell_msg(timeout=timeout)
    while reply["parent_header"].get("msg_id") != msg_id:
        reply = kc.get_shell_msg(timeout=timeout)
    return reply["content"]


def wait_for_output(kc, msg_id, text, timeout=30):
    """Wait for `text` on the request's stdout (the cell has reached that point)."""
    seen = ""
    while text not in seen:
        m = kc.get_iopub_msg(timeout=timeout)
        if m["parent_header"].get("msg_id") == msg_id and m["msg_type"] == "stream":
            seen += m["content"]["text"]
