"""The `tapeml` command: scripts, -c, the REPL, and the docs builder.

    tapeml FILE.ml [ARGS...]   run a script (ARGS are available as the tuple `ARGS`)
    tapeml -c CODE             run a string
    tapeml -i FILE.ml          run a file, then open the REPL with its variables
    tapeml                     the REPL (reads a script from stdin when it is not a terminal)
    tapeml docs build|check    build or check the generated docs
    tapeml docs site|serve     build or preview the docs website (the extra tapeml[docs])
    tapeml kernel install      install the Jupyter kernel (lang/faces/kernel.py)

Exit status: 0 success, 1 language error, 2 bad usage, 130 interrupted (Ctrl-C), 143 terminated
(SIGTERM) and 129 hung up (SIGHUP), both handled as Ctrl-C is: a file being written keeps its old
content and its temporary file is removed (builtins/files.py).
"""
from __future__ import annotations

import os
import sys

from tapeml.faces import runner
from tapeml.faces.runner import Terminated   # (re-exported: the signal handlers raise it)

USAGE = """usage: tapeml [OPTIONS] FILE.ml [ARGS...]
       tapeml [OPTIONS] -c CODE
       tapeml [OPTIONS] -i FILE.ml
       tapeml [--dtype float32|float64] [--device DEVICE]   (interactive session)
       tapeml docs build|check [--root DIR] [--kernel NAME|none]
       tapeml docs site [--root DIR] [--out DIR] | tapeml docs serve [--root DIR] [--addr HOST:PORT]
       tapeml kernel install [--user | --sys-prefix | --prefix DIR] [--name NAME] [--threads N] [--device DEVICE]
       tapeml -h | --help | -V | --version
options: --debug, --dtype float32|float64, --device DEVICE, --threads N, --check-nan, --profile, --profile-out FILE, --profile-top N"""

HELP = USAGE + """

tapeml: a small interpreted matrix language for building, differentiating and training
transformer pieces by hand. `python -m tapeml` is the same command.

Arguments:
  FILE.ml [ARGS...]   run a script; ARGS (strings) are the tuple `ARGS` in the program
  -c CODE [ARGS...]   run CODE, a program given as one string
  -i FILE.ml          run the file, then open the interactive session with its variables
  (none)              the interactive session; with piped input, run the program read from stdin
  docs build|check    regenerate docs/ from the builtin registry / check that it is up to date
                      and prints the same on another machine (--kernel: its OpenBLAS kernel)
  docs site|serve     build the docs website from docs/ into build/site (--out DIR) / preview it
                      on http://127.0.0.1:8000 (needs the extra tapeml[docs])
  kernel install      install the Jupyter kernel "tapeml" (needs the extra tapeml[jupyter]);
                      --threads N: the kernel's BLAS threads; --device DEVICE: its session's
                      device (a kernel per device: --name tapeml-gpu --device torch:cuda)

Options (before FILE, -c or -i; later ones are passed to the program in ARGS):
  --dtype float32|float64   the floating-point type of matrices (default float64); a file's
                            load() keeps its own unless load(path, dtype=...) converts it
  --device DEVICE           where matrices live and compute: numpy (default), torch:cpu,
                            torch:cuda, torch:cuda:N or torch:mps (PyTorch tensors, needs the
                            extra tapeml[torch]); the same programs, the same tape, the same output
  --threads N               run matrix products (BLAS) on N threads (default 1: the fastest on a
                            busy machine; more pays for large matrices on idle cores)
  --check-nan               stop at the first operation that makes a NaN or an infinity, forward
                            or backward, naming it and its source line (check_nan(true) in code)
  --profile                 print, on stderr when the program ends, the time per source line and
                            per builtin, each split into forward and backward
  --profile-out FILE        --profile, and write the profile to FILE in speedscope's format
                            (open it at https://www.speedscope.app)
  --profile-top N           the rows of each profile table (default 15)
  --debug                   show the Python traceback of an internal error
  -h, --help                this help, then exit
  -V, --version             the version, then exit

Exit status:
  0    success
  1    a language error (its message, place and caret are written to stderr)
  2    bad usage: an unknown option, a missing or unreadable file
  129  hung up (SIGHUP: the terminal closed), handled as SIGTERM is
  130  interrupted (Ctrl-C)
  141  the reader of the output went away (tapeml x.ml | head)
  143  terminated (SIGTERM): a file being written keeps its old content, its temporary file removed

Environment:
  TAPEML_HISTORY    the interactive session's history file (default ~/.tapeml_history)
  TAPEML_PROGRESS   0, off, false or no turns progress bars off
  TAPEML_NOTES      0, off, false or no turns off the one-time notes on standard error (as
                    notes(false) does), such as the one for P[0:n-1, ys] (see take_along)
  TAPEML_MALLOC     'default' keeps glibc's malloc settings (tapeml tunes them for NumPy)
  TAPEML_COMPILE    0 runs every function body and loop on the tree-walking evaluator instead of
                    compiling it once to Python (the reference the compiled form is tested against)
  TAPEML_THREADS    BLAS threads when --threads is not given; without either, a count set
                    for BLAS itself (OPENBLAS_NUM_THREADS, OMP_NUM_THREADS, ...) is kept, else 1
  NO_COLOR          set: no colour in the session's error messages
  MPLBACKEND        a matplotlib backend to use instead of Agg for figures
  COLUMNS, LINES    the width and height the session lays matrices out for when the terminal
                    does not say (default 80x24)
"""


def _usage_error(message: str) -> int:
    print(f"tapeml: {message}\n{USAGE}", file=sys.stderr)
    return 2


def run_source(interp, source: str, filename: str, debug: bool = False) -> int:
    """Run one program; print a language error the way users see it. Returns the exit code."""
    tune_runtime()
    outcome = runner.run_cell(interp, source, filename, raise_internal=debug)
    status = outcome.status
    if status == runner.OK:
        return 0
    if status == runner.BROKEN_PIPE:    # the reader went away (`tapeml x.ml | head`): stop quietly
        try:
            devnull = os.open(os.devnull, os.O_WRONLY)
            os.dup2(devnull, sys.stdout.fileno())
        except (OSError, ValueError):
            pass
        return 141
    if status in (runner.ERROR, runner.INTERRUPTED, runner.TERMINATED):
        sys.stdout.flush()
    if status == runner.INTERRUPTED:
        print("Interrupted (Ctrl-C)", file=sys.stderr)
        return 130
    if status == runner.TERMINATED:
        print(f"Terminated ({outcome.message})", file=sys.stderr)
        return 128 + outcome.exception.signum
    if status == runner.INTERNAL:       # a bug in tapeml: say so, without a traceback unless --debug
        print(f"{outcome.text}\n  this is a bug in tapeml; run with --debug for the "
              f"Python traceback", file=sys.stderr)
        return 1
    print(outcome.text, file=sys.stderr)     # a language error, RecursionError, MemoryError
    return 1


def tune_runtime() -> None:
    """Process settings for running tapeml programs (the command line only, never on import):

    - glibc returns large freed blocks to the kernel, and NumPy temporaries of a few MB are then
      faulted in again on every step (up to 2x at mid sizes); keeping them in the heap avoids
      it (mallopt M_MMAP_THRESHOLD / M_TRIM_THRESHOLD). TAPEML_MALLOC=default turns this off.
    - the objects made at start-up (AST, builtins, stdlib) move to the cyclic collector's
      permanent generation, so collections during a program do not rescan them."""
    import gc
    if os.environ.get("TAPEML_MALLOC") != "default" and sys.platform.startswith("linux"):
        try:
            import ctypes
            libc = ctypes.CDLL("libc.so.6")
            libc.mallopt(-3, 32 * 1024 * 1024)      # M_MMAP_THRESHOLD (its maximum on 64-bit)
            libc.mallopt(-1, 512 * 1024 * 1024)     # M_TRIM_THRESHOLD
        except (OSError, AttributeError):
            pass
    gc.freeze()


def _option_value(flag: str, argv: list) -> str | None:
    """The value of `--name VALUE` (taken from argv) or `--name=VALUE`; None when it is missing."""
    if "=" in flag:
        return flag.split("=", 1)[1]
    return argv.pop(0) if argv else None


class Options:
    """The command line's own options (those before FILE, -c or -i)."""

    def __init__(self):
        self.debug = False
        self.dtype = None
        self.device = None
        self.threads = None
        self.diag = Diagnose()

    def parse(self, argv: list) -> int | None:
        """Take the options from the front of argv; an exit status when one ends the command
        (--help, --version, a usage error), else None."""
        while argv and (argv[0].startswith("--") or argv[0] in ("-h", "-V")):
            flag = argv.pop(0)
            if flag == "--debug":
                self.debug = True
            elif flag in ("--check-nan", "--profile", "--profile-out", "--profile-top") or \
                    flag.startswith(("--profile-out=", "--profile-top=")):
                problem = self.diag.option(flag, argv)
                if problem:
                    return _usage_error(problem)
            elif flag in ("--version", "-V"):
                from tapeml import __version__
                print(f"tapeml {__version__}")
                return 0
            elif flag in ("--help", "-h"):
                print(HELP, end="")
                return 0
            elif flag == "--dtype" or flag.startswith("--dtype="):
                self.dtype = _option_value(flag, argv)
                if self.dtype is None:
                    return _usage_error("--dtype needs float32 or float64")
            elif flag == "--device" or flag.startswith("--device="):
                self.device = _option_value(flag, argv)
                if self.device is None:
                    return _usage_error("--device needs numpy, torch:cpu, torch:cuda[:N] or torch:mps")
            elif flag == "--threads" or flag.startswith("--threads="):
                text = _option_value(flag, argv)
                if text is None:
                    return _usage_error("--threads needs a whole number >= 1")
                from tapeml.array import threads
                try:
                    self.threads = threads.parse(text)
                except ValueError as e:
                    return _usage_error(str(e))
            else:
                return _usage_error(f"unknown option '{flag}'")
        return None


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    from tapeml.evaluator.stack import SHALLOW_LIMIT       # (deeper calls continue on a big-stack thread: lang/evaluator/stack.py)
    sys.setrecursionlimit(max(sys.getrecursionlimit(), SHALLOW_LIMIT))
    opts = Options()
    code = opts.parse(argv)
    if code is not None:
        return code
    from tapeml.array import backend
    be = None
    if opts.device is not None:
        try:
            be = backend.make(opts.device)
        except backend.DeviceError as e:
            return _usage_error(str(e))
        os.environ["TAPEML_DEVICE"] = opts.device       # the kernel, and the docs' example runners, too
    if argv and argv[0] == "kernel":
        from tapeml.faces.kernel import main as kernel_main
        return kernel_main(argv[1:])
    if be is None:
        try:
            be = backend.from_environment()     # refused before anything runs, as --device is
        except backend.DeviceError as e:
            return _usage_error(str(e))
    from tapeml.array import threads
    try:
        threads.apply(opts.threads)     # BLAS threads: lang/array/threads.py
    except ValueError as e:             # a bad TAPEML_THREADS
        return _usage_error(str(e))
    if argv and argv[0] == "docs":
        if argv[1:2] in (["site"], ["serve"]):
            from .docs.site import main as site_main
            return site_main(argv[1:])
        from .docs.check import main
        return main(argv[1:])
    # the program's Session: the float type and the device of the options, its own state
    from tapeml.session.session import face_session
    try:
        session = face_session(opts.dtype, be)
    except ValueError as e:
        return _usage_error(str(e))
    with session.entered():
        return run_program(session, argv, opts)


def run_program(session, argv: list, opts: Options) -> int:
    """Run what argv names (-c CODE, -i FILE, FILE, stdin or the REPL) in `session`, whose state
    is current; the exit status."""
    interp, diag, debug = session.interp, opts.diag, opts.debug
    if argv and argv[0] == "-c":
        if len(argv) < 2:
            return _usage_error("-c needs the code to run")
        _warn_late_options(argv[2:])
        interp.set_arguments(tuple(argv[2:]))
        return exit_code(diag.run(interp, lambda: run_source(interp, argv[1], "<string>", debug)))
    if argv and argv[0] == "-i":
        if len(argv) < 2:
            return _usage_error("-i needs a file")
        code = diag.run(interp, lambda: run_file(interp, argv[1], argv[2:], debug))
        if code == 2:
            return code
        if not sys.stdin.isatty():     # piped input: run it after the script, with its names
            source = _stdin_source()
            return exit_code(1 if source is None else run_source(interp, source, "<stdin>", debug) or code)
        from tapeml.faces.repl import run_repl
        return run_repl(session)
    if argv and argv[0].startswith("-"):
        return _usage_error(f"unknown option '{argv[0]}'")
    if argv:
        return exit_code(diag.run(interp, lambda: run_file(interp, argv[0], argv[1:], debug)))
    if not sys.stdin.isatty():
        source = _stdin_source()
        return exit_code(1 if source is None else
                         diag.run(interp, lambda: run_source(interp, source, "<stdin>", debug)))
    if diag.check_nan:
        interp.set_diagnostics(check_nan=True)
    from tapeml.faces.repl import run_repl
    return run_repl(session)


class Diagnose:
    """The command line's diagnostics options (--check-nan, --profile, --profile-out FILE,
    --profile-top N) and running a program under them."""

    def __init__(self):
        self.check_nan = False
        self.profile = False
        self.out = None
        self.top = 15

    def option(self, flag: str, argv: list) -> str | None:
        """Take one option (its value from argv when not given with '='); a usage problem or None."""
        name, eq, value = flag.partition("=")
        if name == "--check-nan":
            self.check_nan = True
            return None
        self.profile = True
        if name == "--profile":
            return None
        if not eq:
            if not argv:
                return f"{name} needs {'a file name' if name == '--profile-out' else 'a number of rows'}"
            value = argv.pop(0)
        if name == "--profile-out":
            # checked now, not after a long run: the folder the profile goes in must be there
            folder = os.path.dirname(os.path.abspath(value)) if value else ""
            if not value or not os.path.isdir(folder):
                return (f"--profile-out: no folder {folder!r} to write the profile in" if value
                        else "--profile-out needs a file name")
            self.out = value
            return None
        if not value.isdigit() or int(value) < 1:
            return f"--profile-top needs a whole number of rows >= 1, got '{value}'"
        self.top = int(value)
        return None

    def run(self, interp, go) -> int:
        """go() under the options: the check turned on first; the profile printed on stderr (and
        written to --profile-out) however the program ends."""
        if self.check_nan:
            interp.set_diagnostics(check_nan=True)
        if not self.profile:
            return go()
        from tapeml.array.profile_report import Report
        from tapeml.evaluator.instrument import profiling
        code = 2
        with profiling(interp) as prof:
            code = go()
        report = Report(prof, interp.sources)
        if code == 2 or not report.ran:     # the file could not be read, or did not parse: nothing ran
            return code
        sys.stdout.flush()
        print(report.table(top=self.top), file=sys.stderr)
        if self.out is not None:
            try:
                report.save(self.out)
            except OSError as e:
                print(f"tapeml: cannot write the profile to '{self.out}': {e.strerror or e}", file=sys.stderr)
                return code or 1
            print(f"profile written to {self.out} (speedscope's format: https://www.speedscope.app)",
                  file=sys.stderr)
        return code


def _warn_late_options(args: list[str]) -> None:
    """tapeml's own options after the script name are the script's ARGS; say so, since
    `tapeml run.ml --dtype float32` otherwise runs in float64 without a word."""
    for a in args:
        name = a.split("=", 1)[0]
        if name in ("--dtype", "--debug", "--check-nan", "--profile", "--profile-out", "--profile-top", "--threads"):
            print(f"tapeml: warning: '{a}' comes after the script, so it is passed to the script in ARGS; "
                  f"put tapeml's options first: tapeml {name} ... FILE.ml", file=sys.stderr)


def run_file(interp, path: str, args: list[str], debug: bool) -> int:
    if not os.path.isfile(path):
        from tapeml.builtins.files import link_trouble
        why = "it is a directory" if os.path.isdir(path) else link_trouble(path) or "no such file"
        print(f"tapeml: cannot open '{path}': {why}", file=sys.stderr)
        return 2
    try:
        with open(path, "rb") as f:
            data = f.read()
    except OSError as e:
        print(f"tapeml: cannot read '{path}': {e.strerror or e}", file=sys.stderr)
        return 2
    source = _decode(data, path)
    if source is None:
        return 1
    _warn_late_options(args)
    interp.set_arguments(tuple(args))
    return run_source(interp, source, path, debug)


def _decode(data: bytes, filename: str) -> str | None:
    """A script's text; None after printing the error when it is not UTF-8 (line:col of the byte)."""
    from tapeml.syntax.errors import LangError, render
    from tapeml.syntax.lexer import decode_source
    try:
        return decode_source(data, filename)
    except LangError as e:
        print(render(e, getattr(e, "source", None)), file=sys.stderr)
        return None


def _stdin_source() -> str | None:
    return _decode(sys.stdin.buffer.read(), "<stdin>")


def exit_code(code: int) -> int:
    sys.stdout.flush()
    return code


def _on_sigterm(signum, frame):
    runner.note_signal()
    raise Terminated(signum)


def _on_sigint(signum, frame):
    runner.note_signal()
    raise KeyboardInterrupt


def entry() -> None:
    import signal
    sys.unraisablehook = runner.quiet_after_signal
    signal.signal(signal.SIGTERM, _on_sigterm)
    if signal.getsignal(signal.SIGINT) is signal.default_int_handler:
        signal.signal(signal.SIGINT, _on_sigint)
    # the terminal closed: unwind as for SIGTERM, unless SIGHUP is ignored (nohup keeps it so)
    if hasattr(signal, "SIGHUP") and signal.getsignal(signal.SIGHUP) is signal.SIG_DFL:
        signal.signal(signal.SIGHUP, _on_sigterm)
    try:
        code = main()
    except Terminated as e:     # outside a program run (the REPL, the docs builder)
        print(f"Terminated ({e.name})", file=sys.stderr)
        code = 128 + e.signum
    except KeyboardInterrupt:   # outside a program run too (an error being printed, a docs build)
        sys.stdout.flush()
        print("Interrupted (Ctrl-C)", file=sys.stderr)
        code = 130
    if code in (129, 130, 143) and runner.signalled():
        # Stopped by a signal, the process ends now: tearing down what the program made (a tape
        # of millions of nodes, a traceback through 20,000 calls) took seconds after the message
        for stream in (sys.stdout, sys.stderr):
            try:
                stream.flush()
            except (OSError, ValueError):
                pass
        os._exit(code)
    sys.exit(code)


if __name__ == "__main__":
    entry()
