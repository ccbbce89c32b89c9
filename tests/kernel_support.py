"""What the kernel tests share (tests/test_kernel.py, tests/test_reentry.py): one request to a
running kernel and what it sent back. Imports nothing of Jupyter, so a module that uses it can
skip its kernel tests when the jupyter extra is missing."""


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
