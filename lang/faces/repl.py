"""The interactive session: a thin prompt_toolkit layer over one tapeml Session.

    run_repl(session)           the session `tapeml` and `tapeml -i FILE` open

The decisions live in pure functions with their own tests, so the prompt_toolkit wiring stays
small (STYLE.md 23-24):

    enter_action(text, cursor)  'submit' or 'newline' (Enter follows IPython: the parser's
                                is_complete says 'incomplete' -> a new line, else submit)
    completions(text, interp)   (complete.py) candidates for the word before the cursor: keywords, builtins
                                (their signature and summary beside them), stdlib functions,
                                session variables, and record fields after a dot
    validate(text)              the first syntax error of the finished lines as (index, message)
    next_indent(text)           the indentation of the next continuation line

prompt_toolkit is imported here only, and only when a session starts (DESIGN.md rule 10).
Each entry is run with a name of its own ("REPL[3]"), so an error inside a function defined
three entries ago still shows that entry's line under its caret.
"""
from __future__ import annotations

import gc
import os
import re
import sys

from tapeml.syntax.errors import LangError, LangSyntaxError, render
from tapeml.syntax.lexer import BLOCK_CLOSER, BLOCK_CONTINUERS, BLOCK_END, BLOCK_OPENERS
from tapeml.syntax.parser import is_complete, parse
from tapeml.array.tape import raw
from tapeml.array.display import display_value
from tapeml.array.printer import format_value
from tapeml.array.values import host, type_name
from tapeml.faces import runner
from tapeml.faces.complete import COMMAND_ALIASES, COMMANDS, Candidate, completions, _live  # noqa: F401 (read here too)
from tapeml.faces.runner import ANS  # noqa: F401 - the variable holding the last echoed value

PROMPT = "ml> "
CONTINUATION = "... "
INDENT = "    "
HISTORY_ENV = "TAPEML_HISTORY"
INDENTERS = BLOCK_OPENERS + BLOCK_CONTINUERS   # a line starting with one indents the next
DEDENTERS = BLOCK_END                          # a line starting with one moves one level left
KEYS_HELP = """Keys
  Enter          run the input when it is complete; inside an open fn/if/for/while block,
                 bracket or after an operator it starts a new line ('...' prompt)
  Esc Enter      always a new line (Alt-Enter)
  Tab            complete a name or a record field (weights.<Tab>); indent at line start
  Up / Down      previous / next entry starting with what is typed (history search)
  Ctrl-R         search the history;  Right / Ctrl-E accepts the grey suggestion
  Ctrl-C         clear the line; while a computation runs, interrupt it
  Ctrl-D         leave (on an empty line)
  Ctrl-X Ctrl-E  edit the input in $EDITOR
Commands
""" + "\n".join(f"  {c:<14} {d}" for c, d in COMMANDS.items()) + """
  ?name          the documentation of a builtin or function (also name?)
  help(), help("name")   the same as a builtin
An input ending in ';' runs without echoing its value."""


# ---- pure functions: Enter, indentation, validation, completion --------------------------------

def _is_command(text: str) -> bool:
    s = text.strip()
    return s.startswith(":") or runner.help_request(s, loose=True) is not None


def enter_action(text: str, cursor: int | None = None) -> str:
    """'submit' or 'newline' for Enter pressed at `cursor` (default: the end) in `text`.

    Commands (`:vars`, `?name`) and empty input submit. With the cursor on an earlier line
    than the last non-blank one, Enter edits (a new line). Otherwise the whole input decides:
    'incomplete' continues on a new line, 'complete' and 'invalid' both submit, so a syntax
    error is reported instead of leaving the user in endless continuation prompts."""
    if cursor is None:
        cursor = len(text)
    if not text.strip() or (_is_command(text) and "\n" not in text.strip()):
        return "submit"
    if text[cursor:].strip() and "\n" in text[cursor:].rstrip():
        return "newline"
    return "newline" if is_complete(text) == "incomplete" else "submit"


def next_indent(text: str) -> str:
    """Indentation for the line after `text`: the last line's, one level deeper after a block
    opener (fn, if, elif, else, for, while) or an unclosed bracket on that line."""
    last = text.split("\n")[-1]
    indent = last[:len(last) - len(last.lstrip())]
    words = re.findall(r"[A-Za-z_]\w*", _strip_strings_and_comments(last))
    if words and words[0] in INDENTERS and BLOCK_CLOSER not in words[1:]:
        return indent + INDENT
    code = _strip_strings_and_comments(last)
    if sum(code.count(c) for c in "([{") > sum(code.count(c) for c in ")]}"):
        return indent + INDENT
    return indent


def dedent_line(text: str) -> str:
    """If the last line is `end`, `else` or `elif ...`, move it one level left (auto-dedent)."""
    lines = text.split("\n")
    last = lines[-1]
    words = re.findall(r"[A-Za-z_]\w*", last)
    if len(lines) > 1 and words and words[0] in DEDENTERS and last.startswith(INDENT):
        lines[-1] = last[len(INDENT):]
    return "\n".join(lines)


def _strip_strings_and_comments(line: str) -> str:
    line = re.sub(r'"(\\.|[^"\\])*"?', '""', line)
    return line.split("#", 1)[0]


def validate(text: str) -> tuple[int, str] | None:
    """The syntax error of `text` as (index into text, 'Kind: message'), or None when it
    parses or only needs more lines (incomplete). Never raises: any failure of the front end
    is reported as a message (ptpython#154 crashed on an escape the validator did not catch)."""
    try:
        parse(text, "<input>")
    except LangSyntaxError as e:
        if is_complete(text) == "incomplete":
            return None
        return _span_index(text, e), f"{e.kind}: {e.message}"
    except LangError as e:  # pragma: no cover - the parser raises syntax errors only
        return _span_index(text, e), f"{e.kind}: {e.message}"
    except Exception as e:  # noqa: BLE001 - a bug in the front end must not kill the prompt
        return len(text), f"InternalError: {type(e).__name__}: {e}"
    return None


def _span_index(text: str, err: LangError) -> int:
    if err.span is None:
        return len(text)
    lines = text.split("\n")
    line = min(max(err.span.line, 1), len(lines))
    index = sum(len(s) + 1 for s in lines[:line - 1]) + err.span.col - 1
    return max(0, min(index, len(text)))


def var_rows(interp) -> list[tuple[str, str, str, str]]:
    """(name, kind, shape, value preview) for each session variable, in definition order."""
    rows = []
    for name, v in interp.variables().items():
        r = host(raw(v))        # another device's matrix read as NumPy (values.host: the one boundary)
        kind = type_name(r)
        if kind == "matrix":
            shape = "x".join(str(n) for n in r.shape) if r.ndim != 1 else str(r.shape[0])
            if r.dtype == bool:
                kind = "bool matrix"
            elif r.ndim == 1:
                kind = "vector"
        elif kind == "tuple":
            shape = f"{len(r)} items"
        elif kind == "record":
            shape = f"{len(r.fields)} fields"
        elif kind == "string":
            shape = f"{len(r)} chars"
        else:
            shape = ""
        if kind == "function":
            preview = r.signature() if hasattr(r, "signature") else format_value(r)
        else:
            preview = " ".join(format_value(r, True).split())
        if len(preview) > 48:
            preview = preview[:45] + "..."
        rows.append((name, kind, shape, preview))
    return rows


def format_vars(interp) -> str:
    rows = var_rows(interp)
    if not rows:
        return "(no variables)"
    head = ("name", "kind", "shape", "value")
    widths = [max(len(r[i]) for r in rows + [head]) for i in range(3)]
    out = []
    for r in [head] + rows:
        out.append("  ".join(r[i].ljust(widths[i]) for i in range(3)) + "  " + r[3])
    return "\n".join(line.rstrip() for line in out)


def terminal_size() -> tuple[int, int]:
    """(columns, rows) of the terminal, from $COLUMNS/$LINES when set; 80x24 without one."""
    import shutil
    size = shutil.get_terminal_size((80, 24))
    return size.columns or 80, size.lines or 24


def history_path() -> str:
    """The history file: $TAPEML_HISTORY, else ~/.tapeml_history."""
    return os.environ.get(HISTORY_ENV) or os.path.join(os.path.expanduser("~"), ".tapeml_history")


# ---- the prompt_toolkit layer -----------------------------------------------------------------

def make_session(interp, *, input=None, output=None, history=None, color: bool = True):
    """A PromptSession wired to `interp`: highlighting, completion, validation, history, keys.
    Tests pass a pipe `input`, a DummyOutput `output` and an InMemoryHistory."""
    from prompt_toolkit import PromptSession
    from prompt_toolkit.auto_suggest import AutoSuggestFromHistory
    from prompt_toolkit.completion import Completer, Completion
    from prompt_toolkit.history import FileHistory, InMemoryHistory
    from prompt_toolkit.lexers import PygmentsLexer
    from prompt_toolkit.validation import ValidationError, Validator

    from tapeml.faces.highlight import TapemlLexer

    class TapemlCompleter(Completer):
        def get_completions(self, document, complete_event):
            for c in completions(document.text_before_cursor, interp):
                yield Completion(c.text, start_position=-c.replace, display=c.display or c.text,
                                 display_meta=c.meta)

    class FinishedLinesValidator(Validator):
        """Flags a syntax error on a line already finished (above the cursor's line) while
        typing; the line being typed is left alone until Enter."""
        def validate(self, document):
            finished = "\n".join(document.lines[:document.cursor_position_row])
            if not finished.strip() or _is_command(document.text):
                return
            problem = validate(finished)
            if problem is not None:
                index, message = problem
                raise ValidationError(cursor_position=index, message=message)

    class SafeFileHistory(FileHistory):
        """A FileHistory that keeps the session going when the file cannot be written."""
        def store_string(self, string):
            try:
                super().store_string(string)
            except OSError:
                pass

        def load_history_strings(self):
            try:
                yield from super().load_history_strings()
            except OSError:
                return

    if history is None:
        path = history_path()
        history = SafeFileHistory(path) if path else InMemoryHistory()

    def continuation(width, line_number, is_soft_wrap):
        return CONTINUATION.rjust(width)

    return PromptSession(
        PROMPT, multiline=True, prompt_continuation=continuation,
        lexer=PygmentsLexer(TapemlLexer) if color else None,
        completer=TapemlCompleter(), complete_while_typing=False,
        validator=FinishedLinesValidator(), validate_while_typing=True,
        history=history, auto_suggest=AutoSuggestFromHistory(), enable_history_search=True,
        key_bindings=_key_bindings(), enable_open_in_editor=True, search_ignore_case=True,
        include_default_pygments_style=True, reserve_space_for_menu=6,
        input=input, output=output)


def _key_bindings():
    """Enter (run or a new line: enter_action), Esc Enter (a new line), Tab at a line's start (indent)."""
    from prompt_toolkit.filters import Condition, has_completions, has_focus
    from prompt_toolkit.key_binding import KeyBindings
    kb = KeyBindings()
    focused = has_focus("DEFAULT_BUFFER")

    @kb.add("enter", filter=focused)
    def _enter(event):
        b = event.current_buffer
        state = b.complete_state
        if state is not None:
            if state.current_completion is not None:
                b.apply_completion(state.current_completion)
                return
            b.cancel_completion()
        doc = b.document
        if enter_action(doc.text, doc.cursor_position) == "newline":
            if doc.is_cursor_at_the_end:
                dedented = dedent_line(doc.text)
                if dedented != doc.text:
                    b.text = dedented
                    b.cursor_position = len(dedented)
                b.insert_text("\n" + next_indent(b.text))
            else:
                b.insert_text("\n")
            return
        text = dedent_line(doc.text)
        if text != doc.text:
            b.text = text
        b.append_to_history()       # written to the history file now, before the entry runs
        event.app.exit(result=text)

    @kb.add("escape", "enter", filter=focused)
    def _newline(event):
        event.current_buffer.insert_text("\n")

    def _current_line_before_cursor():
        from prompt_toolkit.application import get_app
        return get_app().current_buffer.document.current_line_before_cursor

    line_start = Condition(lambda: not _current_line_before_cursor().strip())

    @kb.add("tab", filter=focused & line_start & ~has_completions)
    def _indent(event):
        event.current_buffer.insert_text(INDENT)

    return kb


class Repl:
    """One interactive session: reads entries from a PromptSession (`session`) and runs them in
    `owner`, a tapeml Session (the command line's), or an Interpreter, which then runs in the
    session state current when the Repl is made (lang/session/session.py: Session.of). Each
    entry and command runs with that Session's state current (Session.entered).

    `out` receives echoes and command output (interp.out receives what programs print);
    `err` receives error messages."""

    def __init__(self, owner, session, out=None, err=None):
        self.owner = session_of(owner)
        self.interp = self.owner.interp
        self.session = session
        self.out = out if out is not None else sys.stdout
        self.err = err if err is not None else sys.stderr
        self.count = 0
        self.color = _wants_color(self.err)

    def loop(self) -> int:
        while True:
            try:
                text = self.session.prompt()
            except KeyboardInterrupt:   # Ctrl-C at the prompt: drop the line, ask again
                continue
            except EOFError:            # Ctrl-D on an empty line
                self.write(self.out, "")
                return 0
            # The prompt's asyncio event loop is garbage now; collected later, in the middle of a
            # computation, its __del__ could be where Ctrl-C lands, and Python would print
            # "Exception ignored ... KeyboardInterrupt" and let the loop run on. The garbage of
            # an entry interrupted before is collected here too, its finalizers quiet.
            gc.collect()
            runner.settle()
            try:
                going_on = self.handle(text)
            except KeyboardInterrupt:   # Ctrl-C outside the computation: a help page being made,
                self.flush()            # an error being printed; the session goes on
                self.error("Interrupted (Ctrl-C); the variables set so far are kept")
                continue
            if not going_on:
                return 0

    def handle(self, text: str) -> bool:
        """Run one entry, in the Session's state. False ends the session."""
        with self.owner.entered():
            return self._handle(text)

    def _handle(self, text: str) -> bool:
        stripped = text.strip()
        if not stripped:
            return True
        if stripped.startswith(":"):
            return self.command(stripped)
        if stripped in ("exit", "quit", "exit()", "quit()") and _live(stripped.rstrip("()"), self.interp) is None:
            return False
        name = runner.help_request(stripped, loose=True)
        if name is not None:
            self.show_help(name)
            return True
        self.count += 1
        self.execute(text, f"REPL[{self.count}]")
        return True

    def execute(self, text: str, name: str) -> None:
        def show(value):
            columns, rows = terminal_size()
            self.write(self.out, display_value(value, columns, rows))

        # render is looked up when an error is rendered (a test interrupts it there)
        outcome = runner.run_cell(self.interp, text, name, show=show,
                                  render=lambda e, sources: render(e, sources))
        if outcome.status == runner.OK:
            return
        if outcome.status == runner.TERMINATED:     # ends the session (cli.entry says so)
            raise outcome.exception
        self.flush()
        if outcome.status == runner.INTERRUPTED:
            self.error("Interrupted (Ctrl-C); the variables set so far are kept")
        elif outcome.status in (runner.INTERNAL, runner.BROKEN_PIPE):   # must not end the session
            self.error(f"{outcome.text}\n  this is a bug in tapeml")
        else:                                       # a language error, RecursionError, MemoryError
            self.error(outcome.text)

    def command(self, text: str) -> bool:
        word, _, rest = text.partition(" ")
        word = COMMAND_ALIASES.get(word, word)
        if word == ":quit":
            return False
        if word == ":vars":
            self.write(self.out, format_vars(self.interp))
        elif word == ":reset" and rest.split():
            self.reset_names(rest.split())
        elif word == ":reset":
            n = self.interp.reset()
            self.write(self.out, f"cleared {n} variable{'s' * (n != 1)}")
        elif word == ":help":
            self.write(self.out, KEYS_HELP)
        elif word == ":profile":
            self.profile(rest)
        else:
            self.error(f"unknown command '{word}'; the commands are {', '.join(COMMANDS)}")
        return True

    def reset_names(self, names) -> None:
        """`:reset a b`: only those variables (MATLAB's `clear a b`); a name that is not a variable
        clears nothing and says so (`:reset` alone clears them all)."""
        missing = [n for n in names if not self.interp.has_variable(n)]
        if missing:
            self.error(f":reset: {', '.join(repr(n) for n in missing)} {'is' if len(missing) == 1 else 'are'} "
                       f"not a variable; nothing was cleared (:vars lists them; :reset alone clears all)")
            return
        for n in dict.fromkeys(names):
            self.interp.delete_variable(n)
        k = len(dict.fromkeys(names))
        self.write(self.out, f"cleared {k} variable{'s' * (k != 1)}: {', '.join(dict.fromkeys(names))}")

    def profile(self, code: str) -> None:
        """:profile CODE: run CODE as an entry while the profiler runs, then print its tables."""
        from tapeml.array.profile_report import Report
        from tapeml.evaluator.instrument import profiling
        if not code.strip():
            self.error(":profile needs the code to run, e.g. :profile grad(loss, w)")
            return
        self.count += 1
        with profiling(self.interp) as prof:
            self.execute(code, f"REPL[{self.count}]")
        self.flush()
        report = Report(prof, self.interp.sources)
        if report.ran:
            self.write(self.out, report.table(top=15))

    def show_help(self, name: str) -> None:
        outcome = runner.show_help(self.interp, name)
        if outcome.status == runner.HELP:
            self.write(self.out, outcome.text)
        else:
            self.error(outcome.text)

    def flush(self) -> None:
        for stream in (self.interp.out, self.out):
            try:
                stream.flush()
            except (AttributeError, ValueError, OSError):
                pass

    def write(self, stream, text: str) -> None:
        stream.write(text + "\n")
        stream.flush()

    def error(self, text: str) -> None:
        if self.color:
            first, nl, rest = text.partition("\n")
            text = f"\x1b[31m{first}\x1b[0m{nl}{rest}"
        self.write(self.err, text)


def _wants_color(stream) -> bool:
    if os.environ.get("NO_COLOR"):
        return False
    try:
        return stream.isatty()
    except (AttributeError, ValueError):
        return False


def banner() -> str:
    from tapeml import __version__
    return (f"tapeml {__version__}: ?name or help() for documentation, :help for keys and "
            f"commands, Ctrl-D to leave")


def session_of(owner):
    """The tapeml Session a face runs in: `owner` itself, or one over a bare Interpreter in the
    calling thread's current session state (as the Interpreter runs without one)."""
    from tapeml.array import context
    from tapeml.session.session import Session
    return owner if isinstance(owner, Session) else Session.of(owner, context.current())


def run_repl(owner, *, input=None, output=None, history=None, out=None, err=None,
             show_banner: bool = True) -> int:
    """Run the interactive session on `owner`, a tapeml Session or an Interpreter (its variables
    are kept), until :quit or Ctrl-D. Returns the exit status (0). The keyword arguments let
    tests drive the real application."""
    # The stdlib (~30 ms) is not loaded here: the first completion, help or unknown name loads
    # it (_ensure_stdlib, Interpreter.stdlib_pending), so the first prompt comes sooner.
    owner = session_of(owner)
    session = make_session(owner.interp, input=input, output=output, history=history)
    repl = Repl(owner, session, out=out, err=err)
    if show_banner:
        repl.write(repl.out, banner())
    return repl.loop()
