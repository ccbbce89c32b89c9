"""The Jupyter kernel: tapeml in notebooks (JupyterLab, Notebook, VS Code).

    tapeml kernel install [--user | --sys-prefix | --prefix DIR] [--threads N] [--device DEVICE]
                                                                          install the kernelspec "tapeml"
    python -m tapeml.faces.kernel -f CONNECTION_FILE                      what Jupyter starts

A wrapper kernel on ipykernel's `Kernel` base class: ipykernel owns the protocol (ZeroMQ
sockets, message signing, heartbeat, interrupts, stdout/stderr as stream messages) and this
module answers the requests with the existing pieces of the language:

    execute       runner.run_cell (as every face runs code); each echoed value (the REPL's
                  rule: a top-level expression not ending in ';', as IPython's
                  ast_node_interactivity='all') becomes an execute_result with text/plain
                  (values.display_value at 80 columns) and, for matrices and records,
                  text/html (html_value); errors the protocol's error
                  reply (ename the kind, evalue the message, traceback the CLI's rendering);
                  figures as image/png display data after show() and at the end of each cell,
                  none left open between cells; `ans` holds the last echoed value
    complete      repl.completions (names, record fields, builtin signatures)
    inspect       builtins.help.help_text (the page `?name` shows: a cell `?name` returns it as
                  a pager payload, as IPython does)
    is_complete   parser.is_complete
    %%profile     a cell whose first line is `%%profile [FILE]` runs the rest under the profiler
                  and prints its tables below the cell (time per source line and per builtin,
                  forward and backward), writing FILE in speedscope's format when given
    interrupt     stops the running cell, and each cell sent before the interrupt that had not
                  started; the variables set so far are kept (see "Interrupts" below)

Devices. The kernel's session starts on TAPEML_DEVICE's device (numpy when unset), which
`tapeml kernel install --device torch:cuda` writes into the kernelspec's environment (a kernel
per device: --name tapeml-gpu); a bad value stops the kernel at start with the reason. A
notebook can also choose in its first cell, `set_device("torch:cuda")`, before any matrix
exists, as a script does; there is no magic for it (tapeml has no %-magics but %%profile).
Every display (text/plain, text/html, figures) reads a matrix on the host: values.host.

metakernel was considered and not used: its value is magics, a shell and a parallel mode built
around a REPL process it drives through pexpect or a `do_execute_direct` hook; tapeml runs in the
kernel's own process, needs none of the magics (and would have to disable %-syntax clashing with
its `%` operator), and ipykernel's base class is the one the Jupyter project maintains and
documents for wrapper kernels, with fewer dependencies.

Interrupts. ipykernel ignores SIGINT between requests (SIG_IGN) and installs Python's
default_int_handler only while it handles one, so an interrupt sent just after an execute_request
was lost when it reached the kernel before the request (the cell then ran on forever), and one that
arrived in the request's handler outside the cell's own `try` (before do_execute, or while the
reply was built) escaped into ipykernel's loop ("KeyboardInterrupt caught in kernel", no reply).
This kernel installs its own SIGINT handler for its whole life instead (pre_handler_hook and
post_handler_hook no longer swap handlers). The handler notes when the interrupt arrived and
raises KeyboardInterrupt only inside an armed region, the evaluation of a cell and the drawing of
its figures, and only once per region (a second Ctrl-C does not break the first one's unwinding).
So an interrupt

    - stops the running cell: raised in its evaluation or figures, or, arriving between those
      parts, it ends the cell as interrupted once they are done;
    - stops each cell that had not started when it arrived and whose request was sent before it
      (its header date, stamped by the client, is not later than the interrupt): such a cell does
      not start. That is the cell an interrupt overtook on its way to the kernel, and cells queued
      behind the interrupted one that stop-on-error did not abort (they reached the kernel late);
    - sent while the kernel was idle, stops nothing sent after it.

The comparison uses one clock when client and kernel share a machine; a remote client whose clock
runs behind the kernel's would see an idle interrupt stop a cell sent within that lag.

Stop-on-error: after an error reply ipykernel aborts the requests queued behind the cell; its
7.x race there (a cell sent on seeing the reply could come back `aborted`) is fixed in
kernel_ipykernel.py, the one module that uses ipykernel's private methods.

The kernel holds a tapeml Session (`_new_session`): every request runs with its state current
(Session.entered), so the kernel's float type, generator, device and notes are its own.
"""
from __future__ import annotations

import base64
import re
import signal
import sys
import threading
from datetime import datetime, timezone


from tapeml import __version__
from tapeml.syntax.errors import LangError
from tapeml.syntax.parser import is_complete
from tapeml.faces import runner
from tapeml.faces.repl import completions
from tapeml.faces.kernel_display import (HTML_MAX_COLS, HTML_MAX_FIELDS, HTML_MAX_ROWS,  # noqa: F401
                                         html_value, mime_bundle)
from tapeml.faces.kernel_ipykernel import StopOnError

KERNEL_NAME = "tapeml"
DISPLAY_NAME = "tapeml"

LANGUAGE_INFO = {
    "name": "tapeml",
    "version": __version__,
    "mimetype": "text/x-tapeml",
    "file_extension": ".ml",
    "pygments_lexer": "tapeml",
    "codemirror_mode": "text/x-tapeml",
}


def _new_session():
    """The tapeml Session a kernel runs its cells in (the one place it is made): its own state,
    on TAPEML_DEVICE's device (launch() has refused a bad one)."""
    from tapeml.session.session import face_session
    session = face_session(out=sys.stdout)
    session.interp.progress_out = _PlainStream(sys.stderr)     # progress bars as plain lines
    return session


class _PlainStream:
    """A stream that says it is no terminal, so progress bars write plain log lines."""

    def __init__(self, stream):
        self.stream = stream

    def write(self, text):
        return self.stream.write(text)

    def flush(self):
        self.stream.flush()

    def isatty(self):
        return False


# ---- the kernel ---------------------------------------------------------------------------------

INTERRUPTED = ("KeyboardInterrupt", "interrupted; the variables set so far are kept",
               "Interrupted: the variables set so far are kept")
INTERRUPTED_BEFORE_START = ("KeyboardInterrupt", "interrupted before the cell started; nothing ran",
                            "Interrupted before the cell started: nothing ran")


def _sent_at(parent) -> datetime | None:
    """When the client sent a request (its header's date, timezone-aware), or None."""
    date = parent.get("header", {}).get("date")
    if isinstance(date, str):
        try:
            date = datetime.fromisoformat(date.replace("Z", "+00:00"))
        except ValueError:
            return None
    if not isinstance(date, datetime):
        return None
    return date if date.tzinfo is not None else date.replace(tzinfo=timezone.utc)


class _Interrupts:
    """The kernel's SIGINT handling (the module's docstring, "Interrupts"): its own handler for
    the kernel's whole life, raising only inside an armed region."""

    def start(self):
        super().start()
        if threading.current_thread() is threading.main_thread():    # where signals can be set
            signal.signal(signal.SIGINT, self._on_sigint)

    def pre_handler_hook(self):
        """ipykernel swaps in default_int_handler around each request; the kernel's own
        handler stays (an interrupt outside a cell never raises into ipykernel's loop)."""

    def post_handler_hook(self):
        pass

    def _on_sigint(self, signum, frame):
        now = datetime.now(timezone.utc)
        if self._interrupted_at is None or now > self._interrupted_at:
            self._interrupted_at = now
        self._interrupts += 1
        if self._armed:
            self._armed = False          # once: the unwinding is not interrupted again
            raise KeyboardInterrupt

    def _armed_call(self, since, fn, *args):
        """fn(*args) with a SIGINT raising KeyboardInterrupt inside it: (result, False), or
        (None, True) when an interrupt stopped it, or came after the count `since` (the
        moment before arming). Python runs signal handlers in the main thread only: a cell
        in a subshell's thread is not armed."""
        if threading.current_thread() is not threading.main_thread():
            return fn(*args), False
        try:
            try:
                self._armed = True
                if self._interrupts != since:
                    self._armed = False
                    raise KeyboardInterrupt
                return fn(*args), False
            finally:
                self._armed = False
        except KeyboardInterrupt:
            self._armed = False
            return None, True


class _Cells:
    """execute_request: a cell run in the kernel's Session (runner.run_cell), its echoes, figures,
    %%profile and the error reply."""

    def do_execute(self, code, silent, store_history=True, user_expressions=None,
                   allow_stdin=False, *, cell_meta=None, cell_id=None):
        with self.tapeml_session.entered():
            return self._execute(code, silent)

    def _execute(self, code, silent):
        parent = self.get_parent("shell")
        self.begin_request()
        self.silent = silent
        self.interp.out = sys.stdout
        interrupts = self._interrupts       # first: a later one is seen by the count
        sent, last = _sent_at(parent), self._interrupted_at
        if sent is not None and last is not None and sent <= last:
            # sent before an interrupt that came while it waited: the cell does not start
            error = INTERRUPTED_BEFORE_START
            payload = []
        else:
            result, interrupted = self._armed_call(interrupts, self._run_cell, code)
            error, payload = (INTERRUPTED, []) if interrupted else result
        error = self._show_figures(error)
        if error is None and self._interrupts != interrupts:   # came between the parts
            error = INTERRUPTED
        if error is None:
            return {"status": "ok", "execution_count": self.execution_count,
                    "payload": payload, "user_expressions": {}}
        ename, evalue, text = error
        content = {"ename": ename, "evalue": evalue, "traceback": text.split("\n"),
                   "execution_count": self.execution_count}
        if not silent:
            self.send_response(self.iopub_socket, "error", content)
            if parent.get("content", {}).get("stop_on_error", True):
                self.post_stop_aborting(parent)     # (kernel_ipykernel.py)
        return {"status": "error", **content}

    def _run_cell(self, code):
        """Run a cell: (error or None, payload); an error is (ename, evalue, traceback text).
        A cell whose first line is `%%profile [FILE]` runs the rest under the profiler and
        prints its tables after it (and writes FILE in speedscope's format)."""
        profile = PROFILE_LINE.match(code)
        if profile:
            return self._profile_cell(code, profile.group(1))
        try:
            outcome = runner.run_cell(self.interp, code, f"In[{self.execution_count}]",
                                      show=self._echo, help=True)
        finally:
            self._flush()
        return self._result(outcome)

    def _profile_cell(self, code, path):
        from tapeml.array.profile_report import Report
        from tapeml.evaluator.instrument import profiling
        body = "\n" + code.split("\n", 1)[1] if "\n" in code else ""    # lines keep their numbers
        try:
            with profiling(self.interp) as prof:
                outcome = runner.run_cell(self.interp, body, f"In[{self.execution_count}]",
                                          show=self._echo)
        finally:
            self._flush()
        report = Report(prof, self.interp.sources)
        if not self.silent and report.ran:
            print(report.table(top=15))
            if path:
                try:
                    report.save(path)
                    print(f"profile written to {path} (speedscope's format: https://www.speedscope.app)")
                except OSError as e:
                    print(f"cannot write the profile to '{path}': {e.strerror or e}", file=sys.stderr)
            self._flush()
        return self._result(outcome)

    def _result(self, outcome):
        if outcome.status == runner.OK:
            return None, []
        if outcome.status == runner.HELP:
            # a pager payload, as IPython answers `?name`: JupyterLab shows it below the cell
            return None, [{"source": "page", "data": {"text/plain": outcome.text}, "start": 0}]
        if outcome.status == runner.INTERRUPTED:
            return INTERRUPTED, []
        if outcome.status == runner.TERMINATED:
            raise outcome.exception
        if outcome.status in (runner.INTERNAL, runner.BROKEN_PIPE):   # must not end the kernel
            message = f"{outcome.message}; this is a bug in tapeml"
            return ("InternalError", message, f"InternalError: {message}"), []
        return (outcome.ename, outcome.message, outcome.text), []

    def _show_figures(self, error):
        """The cell's figures as images (after an error or an interrupt too), then none stays
        open; an interrupt while they are drawn closes the rest and ends the cell as
        interrupted. Returns the cell's error."""
        from tapeml.builtins import plot

        def publish():
            try:
                plot.publish_open()
            except Exception as e:  # noqa: BLE001 - a figure that cannot be drawn
                plot.close_all()
                sys.stderr.write(f"warning: a figure could not be drawn ({type(e).__name__}: {e})\n")

        _, interrupted = self._armed_call(self._interrupts, publish)
        if interrupted:
            plot.close_all()
            self._flush()
            return error or INTERRUPTED
        return error

    def _echo(self, value):      # (the runner has set `ans`, the last echoed value)
        if self.silent:
            return
        self._flush()
        self.send_response(self.iopub_socket, "execute_result",
                           {"execution_count": self.execution_count,
                            "data": mime_bundle(value), "metadata": {}})

    def _publish_png(self, png: bytes):
        if getattr(self, "silent", False):
            return
        self._flush()
        self.send_response(self.iopub_socket, "display_data",
                           {"data": {"image/png": base64.b64encode(png).decode("ascii"),
                                     "text/plain": "<figure>"},
                            "metadata": {}})

    def _flush(self):
        for stream in (sys.stdout, sys.stderr):
            try:
                stream.flush()
            except (AttributeError, ValueError, OSError):
                pass


class _Introspection:
    """complete_request, inspect_request, is_complete_request."""

    def do_complete(self, code, cursor_pos):
        with self.tapeml_session.entered():    # (the first completion loads the standard library)
            return self._complete(code, cursor_pos)

    def _complete(self, code, cursor_pos):
        cursor_pos = len(code) if cursor_pos is None else cursor_pos
        found = completions(code[:cursor_pos], self.interp)
        replace = max((c.replace for c in found), default=0)
        return {"status": "ok", "matches": [c.text for c in found],
                "cursor_start": cursor_pos - replace, "cursor_end": cursor_pos,
                "metadata": {"_jupyter_types_experimental": [
                    {"text": c.text, "start": cursor_pos - c.replace, "end": cursor_pos,
                     "signature": c.meta} for c in found]}}

    def do_inspect(self, code, cursor_pos, detail_level=0, omit_sections=()):
        with self.tapeml_session.entered():    # (the page runs the examples)
            return self._inspect(code, cursor_pos)

    def _inspect(self, code, cursor_pos):
        from tapeml.builtins.help import help_text
        name = _word_at(code, len(code) if cursor_pos is None else cursor_pos)
        if not name:
            return {"status": "ok", "found": False, "data": {}, "metadata": {}}
        try:
            text = help_text(name, self.interp)
        except LangError:
            return {"status": "ok", "found": False, "data": {}, "metadata": {}}
        return {"status": "ok", "found": True, "data": {"text/plain": text}, "metadata": {}}

    def do_is_complete(self, code):
        status = is_complete(code)
        if status == "incomplete":
            from tapeml.faces.repl import next_indent
            return {"status": "incomplete", "indent": next_indent(code.rstrip("\n"))}
        return {"status": status}


def _kernel_class():
    """The Kernel subclass (ipykernel imported only when a kernel starts: DESIGN.md rule 10)."""
    from ipykernel.kernelbase import Kernel

    class TapemlKernel(_Interrupts, _Cells, _Introspection, StopOnError, Kernel):
        implementation = "tapeml"
        implementation_version = __version__
        language = "tapeml"
        language_version = __version__
        language_info = LANGUAGE_INFO
        banner = (f"tapeml {__version__}: a matrix language with a reverse-mode tape; "
                  f"?name for a builtin's help")
        help_links = []

        def __init__(self, **kwargs):
            super().__init__(**kwargs)
            from tapeml.builtins import plot
            self.tapeml_session = _new_session()     # every request runs in its state (Session.entered)
            self.interp = self.tapeml_session.interp
            self._armed = False              # a SIGINT now raises KeyboardInterrupt (in a cell)
            self._interrupts = 0             # SIGINTs received
            self._interrupted_at = None      # when the latest one arrived (UTC)
            plot.set_publisher(self._publish_png)

        def set_parent(self, ident, parent, channel="shell"):
            """Also tag the output of print (sys.stdout, sys.stderr) with the request, as
            IPython's kernel does, so clients file the stream under its cell."""
            super().set_parent(ident, parent, channel)
            if channel == "shell":
                for stream in (sys.stdout, sys.stderr):
                    if hasattr(stream, "set_parent"):
                        stream.set_parent(parent)

    return TapemlKernel


PROFILE_LINE = re.compile(r"^%%profile(?:[ \t]+(\S.*?))?[ \t]*(?:\n|$)")


def _word_at(code: str, cursor: int) -> str:
    """The name under or just before the cursor (a `fn(` call's name when the cursor is inside
    its parentheses right after the opening one)."""
    start = cursor
    while start > 0 and (code[start - 1].isalnum() or code[start - 1] == "_"):
        start -= 1
    end = cursor
    while end < len(code) and (code[end].isalnum() or code[end] == "_"):
        end += 1
    word = code[start:end]
    if not word and start > 0 and code[start - 1] == "(":
        return _word_at(code, start - 1)
    return word if re.fullmatch(r"[A-Za-z_]\w*", word or "") else ""


# ---- install ------------------------------------------------------------------------------------

INSTALL_USAGE = ("usage: tapeml kernel install [--user | --sys-prefix | --prefix DIR] [--name NAME] [--threads N] "
                 "[--device DEVICE]")


def kernel_spec(threads: int | None = None, device: str | None = None) -> dict:
    """The kernelspec; `threads`: the kernel's BLAS threads (TAPEML_THREADS in its environment;
    without it the kernel runs on the command line's default: lang/array/threads.py); `device`:
    its session's device (TAPEML_DEVICE in its environment; without it, numpy)."""
    spec = {"argv": [sys.executable, "-m", "tapeml.faces.kernel", "-f", "{connection_file}"],
            "display_name": DISPLAY_NAME, "language": "tapeml",
            "interrupt_mode": "signal", "metadata": {"debugger": False}}
    env = {}
    if threads is not None:
        env["TAPEML_THREADS"] = str(threads)
    if device is not None:
        env["TAPEML_DEVICE"] = device
    if env:
        spec["env"] = env
    return spec


def install(user: bool = False, prefix: str | None = None, name: str = KERNEL_NAME,
            threads: int | None = None, device: str | None = None) -> str:
    """Install the kernelspec through jupyter_client's KernelSpecManager; returns its folder."""
    import json
    import tempfile
    import os
    from jupyter_client.kernelspec import KernelSpecManager
    with tempfile.TemporaryDirectory() as tmp:
        with open(os.path.join(tmp, "kernel.json"), "w", encoding="utf-8") as f:
            json.dump(kernel_spec(threads, device), f, indent=1)
        return KernelSpecManager().install_kernel_spec(tmp, name, user=user, prefix=prefix)


def main(argv: list[str]) -> int:
    """`tapeml kernel install ...` (the command line's `kernel` word)."""
    if not argv or argv[0] != "install":
        print(INSTALL_USAGE, file=sys.stderr)
        return 2
    user, prefix, name, threads, device = False, None, KERNEL_NAME, None, None
    args = argv[1:]
    while args:
        flag = args.pop(0)
        if flag == "--user":
            user = True
        elif flag == "--sys-prefix":
            prefix = sys.prefix
        elif flag == "--prefix" and args:
            prefix = args.pop(0)
        elif flag == "--name" and args:
            name = args.pop(0)
        elif flag == "--threads" and args:
            from tapeml.array.threads import parse
            try:
                threads = parse(args.pop(0))
            except ValueError as e:
                print(f"tapeml: kernel install: {e}\n{INSTALL_USAGE}", file=sys.stderr)
                return 2
        elif flag == "--device" and args:
            from tapeml.array import backend
            device = args.pop(0)
            try:
                backend.make(device)        # a device this machine can use (torch installed, the GPU there)
            except backend.DeviceError as e:
                print(f"tapeml: kernel install: {e}\n{INSTALL_USAGE}", file=sys.stderr)
                return 2
        elif flag in ("-h", "--help"):
            print(INSTALL_USAGE)
            return 0
        elif flag in ("--prefix", "--name", "--threads", "--device"):     # the last word, with no value
            print(f"tapeml: kernel install: option '{flag}' needs a value\n{INSTALL_USAGE}", file=sys.stderr)
            return 2
        else:
            print(f"tapeml: kernel install: unknown option '{flag}'\n{INSTALL_USAGE}", file=sys.stderr)
            return 2
    if user and prefix is not None:
        print(f"tapeml: kernel install: --user and --prefix/--sys-prefix exclude each other\n{INSTALL_USAGE}",
              file=sys.stderr)
        return 2
    try:
        import jupyter_client  # noqa: F401
    except ImportError:
        print("tapeml: the kernel needs the jupyter extra: pip install 'tapeml[jupyter]'", file=sys.stderr)
        return 1
    try:
        path = install(user=user, prefix=prefix, name=name, threads=threads, device=device)
    except OSError as e:
        print(f"tapeml: cannot install the kernel: {e.strerror or e} (try --user)", file=sys.stderr)
        return 1
    print(f"installed the kernel '{name}' in {path}")
    return 0


def launch() -> None:
    """Start a kernel (python -m tapeml.faces.kernel -f CONNECTION_FILE)."""
    try:
        from ipykernel.kernelapp import IPKernelApp
    except ImportError:
        print("tapeml: the kernel needs the jupyter extra: pip install 'tapeml[jupyter]'", file=sys.stderr)
        sys.exit(1)
    from tapeml.evaluator.stack import SHALLOW_LIMIT       # (deeper calls continue on a big-stack thread: lang/evaluator/stack.py)
    sys.setrecursionlimit(max(sys.getrecursionlimit(), SHALLOW_LIMIT))
    from tapeml.array import threads
    try:
        threads.apply()         # BLAS threads: TAPEML_THREADS (kernel install --threads) or the default
    except ValueError as e:
        print(f"tapeml: {e}", file=sys.stderr)
        sys.exit(2)
    from tapeml.array import backend
    try:
        backend.current()       # the device: TAPEML_DEVICE (kernel install --device) or numpy
    except backend.DeviceError as e:
        print(f"tapeml: {e}", file=sys.stderr)     # (it names TAPEML_DEVICE)
        sys.exit(2)
    IPKernelApp.launch_instance(kernel_class=_kernel_class())


if __name__ == "__main__":
    launch()
