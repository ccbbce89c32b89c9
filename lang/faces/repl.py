"""The interactive session: a thin prompt_toolkit layer over one Interpreter.

    run_repl(interp)            the session `tapeml` and `tapeml -i FILE` open

The decisions live in pure functions with their own tests, so the prompt_toolkit wiring stays
small (STYLE.md 23-24):

    enter_action(text, cursor)  'submit' or 'newline' (Enter follows IPython: the parser's
                                is_complete says 'incomplete' -> a new line, else submit)
    completions(text, interp)   candidates for the word before the cursor: keywords, builtins
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
from dataclasses import dataclass

from tapeml.syntax.errors import LangError, LangSyntaxError, render
from tapeml.syntax.lexer import BLOCK_CLOSER, BLOCK_CONTINUERS, BLOCK_END, BLOCK_OPENERS, KEYWORDS
from tapeml.syntax.parser import is_complete, parse
from tapeml.array.tape import raw
from tapeml.array.values import Function, Record, describe, display_value, format_value, host, type_name
from tapeml.faces import runner
from tapeml.faces.runner import ANS  # noqa: F401 - the variable holding the last echoed value

PROMPT = "ml> "
CONTINUATION = "... "
INDENT = "    "
HISTORY_ENV = "TAPEML_HISTORY"
INDENTERS = BLOCK_OPENERS + BLOCK_CONTINUERS   # a line starting with one indents the next
DEDENTERS = BLOCK_END                          # a line starting with one moves one level left
COMMANDS = {
    ":vars": "list the session's variables with kind, shape and value",
    ":reset": "clear the session's variables",
    ":profile": ":profile CODE runs CODE, then prints its time per line and builtin (forward, backward)",
    ":help": "keys and commands of the session",
    ":quit": "leave the session (Ctrl-D too)",
}
COMMAND_ALIASES = {":q": ":quit", ":exit": ":quit", ":v": ":vars", ":h": ":help"}
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


@dataclass(frozen=True)
class Candidate:
    """One completion: the full `text` replacing the last `replace` characters, and `meta`
    (the signature and summary, a value's description, or 'keyword') shown beside it."""
    text: str
    replace: int
    meta: str = ""
    display: str = ""


WORD = re.compile(r"[A-Za-z_]\w*$")
FIELD = re.compile(r"([A-Za-z_]\w*(?:\.[A-Za-z_]\w*|\[\s*\d+\s*\])*)\.([A-Za-z_]\w*)?$")
STEP = re.compile(r"\.([A-Za-z_]\w*)|\[\s*(\d+)\s*\]")     # .field or [3] in a FIELD path


def _builtin_meta(b) -> str:
    return f"{b.signature()}  {b.summary}"


def _value_meta(v) -> str:
    v = raw(v)
    if isinstance(v, Function):
        return v.signature()
    if isinstance(v, Record):
        return "record {" + ", ".join(v.fields) + "}"
    if getattr(v, "signature", None) and callable(v.signature):
        return _builtin_meta(v)
    return describe(v)


def completions(text: str, interp=None) -> list[Candidate]:
    """Completion candidates for the end of `text` (the text before the cursor).

    After `name.`, `a.b.` or `w.heads[0].`, the fields of that live record (a variable, its
    fields and tuple items by number, never a call: nothing is evaluated). After `:`, the
    session commands. Otherwise names starting with the word before the cursor: session variables, keywords, builtins and stdlib functions, sorted."""
    from tapeml.builtins import REGISTRY
    line = text.split("\n")[-1]
    stripped = line.lstrip()
    if stripped.startswith(":") and " " not in stripped:
        names = list(COMMANDS) + list(COMMAND_ALIASES)
        return [Candidate(c, len(stripped), COMMANDS.get(c, COMMANDS.get(COMMAND_ALIASES.get(c), "")))
                for c in names if c.startswith(stripped) and c != stripped]
    if _inside_string(line):
        m = re.search(r'help\(\s*"([A-Za-z_]\w*)?$', line)
        if not m:
            return []
        prefix = m.group(1) or ""
        return [c for c in _name_candidates(prefix, interp, REGISTRY) if c.meta != "keyword"]
    m = FIELD.search(line)
    if m and not re.search(r"[\d]$", line[:m.start()] if m.start() else ""):
        root = re.match(r"[A-Za-z_]\w*", m.group(1)).group(0)
        prefix = m.group(2) or ""
        value = _live(root, interp)
        for field, index in STEP.findall(m.group(1)[len(root):]):
            value = raw(value)
            if field and isinstance(value, Record) and field in value.fields:
                value = value.fields[field]
            elif index and isinstance(value, tuple) and int(index) < len(value):
                value = value[int(index)]           # a tuple item: heads[0] (nothing is evaluated)
            else:
                return []
        value = raw(value)
        if not isinstance(value, Record):
            return []
        return [Candidate(k, len(prefix), describe(v)) for k, v in value.fields.items()
                if k.startswith(prefix)]
    m = WORD.search(line)
    if not m:
        return []
    before = line[:m.start()]
    if before.endswith(".") or (before and before[-1].isdigit()):
        return []
    return _name_candidates(m.group(0), interp, REGISTRY)


def _inside_string(line: str) -> bool:
    """Whether the end of `line` is inside a string's text (not inside its `{...}` part)."""
    state = []          # stack of "string" / "interp"
    i = 0
    while i < len(line):
        ch = line[i]
        top = state[-1] if state else "code"
        if top == "string":
            if ch == "\\":
                i += 1
            elif ch == '"':
                state.pop()
            elif ch == "{" and line[i + 1:i + 2] != "{":
                state.append("interp")
            elif ch == "{":
                i += 1
        else:
            if ch == "#" and top == "code":
                return False
            if ch == '"':
                state.append("string")
            elif ch == "}" and top == "interp":
                state.pop()
        i += 1
    return bool(state) and state[-1] == "string"


def _ensure_stdlib(interp) -> None:
    """The prelude's stdlib functions, loaded (run_repl loads them before the first prompt)."""
    if interp is not None and getattr(interp, "stdlib_pending", False):
        interp.load_stdlib()


def _live(name: str, interp):
    if interp is None:
        return None
    _ensure_stdlib(interp)
    try:
        return interp.get_variable(name)
    except KeyError:
        return None


def _name_candidates(prefix: str, interp, registry) -> list[Candidate]:
    from tapeml.builtins.help import stdlib_table
    table = stdlib_table()
    found: dict[str, str] = {}
    if interp is not None:
        _ensure_stdlib(interp)
        for name in interp.visible_names():
            hidden = name.startswith("<") or (name.startswith("_") and not prefix.startswith("_"))
            if name.startswith(prefix) and not hidden:
                value = interp.get_variable(name)
                doc = table.get(name)
                if doc and not interp.has_variable(name):       # a stdlib function
                    found[name] = f"{doc['signature']}  {doc['summary']}"
                else:
                    found[name] = _value_meta(value)
    for name in KEYWORDS:
        if name.startswith(prefix):
            found.setdefault(name, "keyword")
    for name, b in registry.items():
        if name.startswith(prefix):
            found.setdefault(name, _builtin_meta(b))
    return [Candidate(name, len(prefix), meta) for name, meta in sorted(found.items())
            if name != prefix or meta != "keyword"]


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
    from prompt_toolkit.filters import Condition, has_completions, has_focus
    from prompt_toolkit.history import FileHistory, InMemoryHistory
    from prompt_toolkit.key_binding import KeyBindings
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

    line_start = Condition(lambda: not _current_line_before_cursor().strip())

    def _current_line_before_cursor():
        from prompt_toolkit.application import get_app
        return get_app().current_buffer.document.current_line_before_cursor

    @kb.add("tab", filter=focused & line_start & ~has_completions)
    def _indent(event):
        event.current_buffer.insert_text(INDENT)

    def continuation(width, line_number, is_soft_wrap):
        return CONTINUATION.rjust(width)

    return PromptSession(
        PROMPT, multiline=True, prompt_continuation=continuation,
        lexer=PygmentsLexer(TapemlLexer) if color else None,
        completer=TapemlCompleter(), complete_while_typing=False,
        validator=FinishedLinesValidator(), validate_while_typing=True,
        history=history, auto_suggest=AutoSuggestFromHistory(), enable_history_search=True,
        key_bindings=kb, enable_open_in_editor=True, search_ignore_case=True,
        include_default_pygments_style=True, reserve_space_for_menu=6,
        input=input, output=output)


class Repl:
    """One interactive session: reads entries from a PromptSession and runs them in `interp`.

    `out` receives echoes and command output (interp.out receives what programs print);
    `err` receives error messages."""

    def __init__(self, interp, session, out=None, err=None):
        self.interp = interp
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
        """Run one entry. False ends the session."""
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
        self.write(self.out, Report(prof, self.interp.sources).table(top=15))

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


def run_repl(interp, *, input=None, output=None, history=None, out=None, err=None,
             show_banner: bool = True) -> int:
    """Run the interactive session on `interp` (its variables are kept) until :quit or Ctrl-D.
    Returns the exit status (0). The keyword arguments let tests drive the real application."""
    # The stdlib (~30 ms) is not loaded here: the first completion, help or unknown name loads
    # it (_ensure_stdlib, Interpreter.stdlib_pending), so the first prompt comes sooner.
    session = make_session(interp, input=input, output=output, history=history)
    repl = Repl(interp, session, out=out, err=err)
    if show_banner:
        repl.write(repl.out, banner())
    return repl.loop()
