"""The tree-walking evaluator: one method per node kind, dispatched through a table.

Scopes: a script's top level is one environment; each function call opens a new one whose
parent is the environment the function was defined in (closures). Blocks do not open scopes.
Builtins and the stdlib prelude live below the globals.

By job: expressions here; statements (assignment, if, while, for, return) in lang/evaluator/statements.py,
indexing in lang/evaluator/indexing.py, calls and imports in lang/evaluator/calls.py (mixins of Interpreter); scopes
and control-flow signals in lang/evaluator/scope.py.
"""
from __future__ import annotations

import math
import os
import sys

import numpy as np

from tapeml.syntax import ast as A
from tapeml.array import diagnostics, limits, ops
from tapeml.array.backend import ARRAYS, new_matrix, to_numpy
from tapeml.evaluator import compiler
from tapeml.evaluator.calls import Calls
from tapeml.builtins.context import Context
from tapeml.array.formatting import apply_spec
from tapeml.syntax.formatspec import spec_of
from tapeml.syntax.errors import (STDLIB_PREFIX, close_names, InternalError, LangError, NameErr, RecursionErr,
                     ShapeError, TypeErr, ValueErr)
from tapeml.builtins.registry import FOREIGN_NAMES
from tapeml.evaluator.indexing import Indexing
from tapeml.syntax.lexer import FOREIGN_WORDS
from tapeml.syntax.parser import parse
from tapeml.evaluator import progress
from tapeml.array.ranges import plan_range
from tapeml.evaluator.scope import Env
from tapeml.evaluator.statements import Statements
from tapeml.array.tape import Box, raw
from tapeml.array.values import Dict, Function, Record, describe, dict_key, is_numeric, shape_text
from tapeml.array.printer import format_value

_STDLIB_TREES: dict = {}    # (file name, text) -> parsed Program, shared by all interpreters

from tapeml.evaluator.semantics import (BINARY, FLOAT_OPS, binary, condition_value, field, is_mask, range_note,
                                        logical_mask, transpose, unary)


def node_classes() -> list:
    """Every syntax node class: the subclasses of ast.Node, at any depth, without the drafts that
    the `ast.node` decorator replaced by their record types."""
    out, todo = [], list(A.Node.__subclasses__())
    while todo:
        cls = todo.pop()
        if "_replaced" not in cls.__dict__:
            out.append(cls)
        todo.extend(cls.__subclasses__())
    return out


def missing_handler(cls):
    """The dispatch entry of a node class the evaluator has no eval_ method for: a bug in tapeml."""
    def fail(node, env):
        raise InternalError(f"the evaluator has no handler for the node class {cls.__name__} "
                            f"(an Interpreter method eval_{cls.__name__.lower()})")
    return fail


class Interpreter(Statements, Calls, Indexing):
    def __init__(self, out=None, load_prelude: bool = True):
        from tapeml.builtins import REGISTRY  # registers every builtin module
        from tapeml.array import backend
        backend.current()   # the session's device (TAPEML_DEVICE's by default): a bad one is a
                            # DeviceError (a ValueError) here, as for tapeml.Session, not at the first matrix
        self.out = out if out is not None else sys.stdout
        self.err = None                 # where notes go (None: sys.stderr at the time of writing)
        self.noted: set = set()         # the source lines that printed their note (indexing.grid_note)
        self.context = Context(self)    # what a builtin declared with context=True receives
        self.sources: dict[str, str] = {}
        self.depth = 0
        self.modules: dict[str, Record] = {}
        self.importing: list[str] = []
        self.base = Env(None, dict(REGISTRY))
        self.prelude = Env(self.base, {"ARGS": ()})   # script arguments (the CLI fills them in)
        self.globals = Env(self.prelude)
        self.end_stack: list = []
        self.current_call = None
        self.compiled = True            # run compiled bodies (false while a diagnostics mode is on)
        self.dir_stack: list[str] = []
        self.progress_out = None        # where progress bars draw (lang/evaluator/progress.py: stream_for)
        self.progress_bars: list = []   # the bars of the progress(...) loops running, innermost last
        self.dispatch = {cls: getattr(self, "eval_" + cls.__name__.lower(), None) or missing_handler(cls)
                         for cls in node_classes()}
        # The stdlib is run into the prelude on the first name no scope has (eval_name): most
        # programs and every start-up pay nothing for it until then.
        self.stdlib_pending = load_prelude
        # diagnostics (check_nan, the profiler, show_tape) belong to the session: an interpreter
        # made while one is on is their span source from the start (lang/evaluator/instrument.py)
        if diagnostics._ACTIVE and diagnostics.current().active:
            self.set_diagnostics()

    # ---- the variables, for the faces and the Session (they never reach into the scopes) ----
    def variables(self) -> dict:
        """The program's own variables (name -> value), in the order they were defined (a copy)."""
        return dict(self.globals.vars)

    def has_variable(self, name: str) -> bool:
        return name in self.globals.vars

    def get_variable(self, name: str):
        """The value `name` has for the program: its own variable, else the standard library's or
        the builtin's (loading the standard library on first need). KeyError when none."""
        if self.stdlib_pending and name not in self.globals.vars:
            self.load_stdlib()
        return self.globals.lookup(name)

    def set_variable(self, name: str, value) -> None:
        self.globals.vars[name] = value

    def delete_variable(self, name: str) -> None:
        del self.globals.vars[name]

    def visible_names(self):
        """Every name the program can use: its variables, the standard library's, the builtins."""
        return self.globals.names()

    def set_arguments(self, args: tuple) -> None:
        """ARGS, the script's arguments (the command line fills them in)."""
        self.prelude.vars["ARGS"] = tuple(args)

    def stdlib_values(self) -> dict:
        """The standard library's names and values (loading it on first need), and ARGS."""
        if self.stdlib_pending:
            self.load_stdlib()
        return dict(self.prelude.vars)

    def share_stdlib(self, other: "Interpreter") -> None:
        """Take `other`'s loaded standard library instead of running it again (the docs builder
        runs hundreds of examples: values are immutable, so sharing them is safe)."""
        self.prelude.vars.update(other.prelude.vars)
        self.sources.update(other.sources)
        self.stdlib_pending = False

    def reset(self) -> int:
        """Forget the program's variables and imported modules; returns how many variables there were."""
        n = len(self.globals.vars)
        self.globals.vars.clear()
        self.modules.clear()
        return n

    # ---- entry points ----------------------------------------------------------------------
    def load_stdlib(self) -> None:
        """Run stdlib/*.ml into the prelude scope (below user globals)."""
        self.stdlib_pending = False
        from importlib import resources
        try:
            files = sorted(p for p in resources.files("tapeml.stdlib").iterdir() if p.name.endswith(".ml"))
        except (ModuleNotFoundError, FileNotFoundError):
            return
        for path in files:
            text = path.read_text(encoding="utf-8")
            name = f"{STDLIB_PREFIX}/{path.name}"
            self.sources[name] = text
            key = (name, text)
            if key not in _STDLIB_TREES:     # trees are immutable: parse each file once per process
                _STDLIB_TREES[key] = parse(text, name)
            self.exec_block(_STDLIB_TREES[key].body, self.prelude)

    def run(self, source: str, filename: str = "<input>", echo=None, env: Env | None = None):
        """Parse and run a program. `echo(value)` is called for each top-level expression
        statement with a non-none value that did not end in ';' (the REPL)."""
        self.sources[filename] = source
        program = parse(source, filename)
        env = env or self.globals
        main = None         # a script run as a file counts as being imported while it runs
        if filename not in ("<input>", "<string>") and os.path.exists(filename):
            self.dir_stack.append(os.path.dirname(os.path.abspath(filename)))
            if os.path.realpath(filename) not in self.importing:     # (its real path: a symlink too)
                main = os.path.realpath(filename)
                self.importing.append(main)
        else:
            self.dir_stack.append(os.getcwd())
        stmt = None
        quiet = np.errstate(all="ignore")   # NumPy's warnings off while tapeml runs (1 / 0 is inf without
        quiet.__enter__()                   # a word); the host program's error state is back after
        try:
            for stmt in program.body:
                if echo is not None and type(stmt) is A.ExprStmt:
                    value = self.eval(stmt.expr, env)
                    if value is not None and not stmt.silent:
                        try:
                            echo(value)
                        except LangError as e:      # a value the display refuses (too deeply nested)
                            raise e.with_span(stmt.span) from None
                elif type(stmt) is A.For or type(stmt) is A.While:
                    # a top-level loop runs compiled over this scope (lang/evaluator/compiler.py)
                    code = compiler.code_for_loop(stmt) if self.compiled else None
                    if code is None:
                        self.exec_stmt(stmt, env)
                    else:
                        code(self, env)
                else:
                    self.exec_stmt(stmt, env)
        except RecursionError:
            # deep nesting outside any function call (those convert it themselves)
            self.depth = 0
            raise RecursionErr("the computation nests too deeply: an expression or a value here nests "
                               "deeper than tapeml can follow; split it into several statements "
                               "(name the parts) or build the value in a loop", stmt.span if stmt else None) from None
        finally:
            quiet.__exit__(None, None, None)
            self.dir_stack.pop()
            if main is not None:
                self.importing.remove(main)

    # ---- evaluation core -------------------------------------------------------------------
    def eval(self, node, env):
        return self.dispatch[type(node)](node, env)

    def exec_stmt(self, node, env):
        return self.dispatch[type(node)](node, env)

    def exec_block(self, body, env):
        dispatch = self.dispatch
        for stmt in body:
            dispatch[type(stmt)](stmt, env)

    # ---- statements ------------------------------------------------------------------------
    def eval_exprstmt(self, node, env):
        return self.eval(node.expr, env)

    def eval_number(self, node, env):
        return node.value

    def eval_bool(self, node, env):
        return node.value

    def eval_nonelit(self, node, env):
        return None

    def eval_string(self, node, env):
        parts = node.parts
        if len(parts) == 1 and type(parts[0]) is str:
            return parts[0]
        # a list, not a generator: a generator consumed by C code re-enters the evaluator on
        # the C stack, and deep recursion through it crashed the process (segfault)
        try:
            texts = [p if type(p) is str else self.eval_formatted(p, env) if type(p) is A.Formatted
                     else format_value(self.eval(p, env)) for p in parts]
            limits.check_join("the interpolated string", texts)
        except LangError as e:
            raise e.with_span(node.span) from None
        return "".join(texts)

    def eval_formatted(self, node, env):
        """"{x:.3f}": the value under its format spec (formatspec.py); errors at the spec."""
        value = self.eval(node.value, env)
        try:
            return apply_spec(value, spec_of(node.spec))
        except LangError as e:
            raise e.with_span(node.span) from None

    def eval_name(self, node, env):
        name = node.name
        e = env
        while e is not None:
            v = e.vars
            if name in v:
                return v[name]
            e = e.parent
        if self.stdlib_pending:
            self.load_stdlib()
            return self.eval_name(node, env)
        raise self.unknown_name(name, node.span, env)

    def set_diagnostics(self, **modes):
        """Turn the session's diagnostics on or off (check_nan=bool, profiler=Profiler or None,
        recorder=list or None: lang/array/diagnostics.py); while any is on, this interpreter is
        their span source (lang/evaluator/instrument.py). Returns the session's Diagnostics."""
        from tapeml.evaluator import instrument
        return instrument.set_modes(self, **modes)

    def work_bar(self, total: int, desc: str):
        """A progress bar for a builtin's own long loop (jacobian's backward passes), drawn as
        a progress(...) loop's is, once it has run a while (lang/evaluator/progress.py, work_bar)."""
        return progress.work_bar(self, total, desc)

    def unknown_name(self, name, span, env) -> NameErr:
        if name in FOREIGN_WORDS:
            return NameErr(f"undefined name '{name}'; tapeml writes {FOREIGN_WORDS[name]}", span)
        if name in FOREIGN_NAMES:
            return NameErr(f"undefined name '{name}'; tapeml writes {FOREIGN_NAMES[name][0]}", span)
        if name.lower() in ("nan", "inf", "infinity"):    # printed as words, but not literals
            return NameErr(f"undefined name '{name}'; tapeml has no {name} literal: write "
                           f"{'0 / 0' if name.lower() == 'nan' else '1 / 0'}", span)
        close = close_names(name, env.names())
        hint = f"; did you mean '{close[0]}'?" if close else ""
        return NameErr(f"undefined name '{name}'{hint}", span)

    def eval_tuplelit(self, node, env):
        return tuple([self.eval(x, env) for x in node.items])     # a list: see eval_string

    def eval_recordlit(self, node, env):
        return Record({name: self.eval(x, env) for name, x in node.fields})

    def eval_dictlit(self, node, env):
        """{key: value, ...}: keys evaluated and checked (values.dict_key); a key given twice keeps
        its first place and its last value, as in Python."""
        items = {}
        for knode, vnode in node.items:
            try:
                k = self.eval(knode, env)
            except NameErr as e:
                if type(knode) is A.Name and e.span is knode.span:
                    e.message += (f"; a word as a dictionary key is a string: {{\"{knode.name}\": ...}} "
                                  f"(and {{{knode.name} = ...}} is a record)")
                raise
            try:
                key = dict_key(k)
            except LangError as e:
                raise e.with_span(knode.span) from None
            items[key] = self.eval(vnode, env)
        return Dict(items)

    def eval_lambda(self, node, env):
        return Function("<anonymous>", node.params, node.body, env, node.span)

    def eval_logical(self, node, env):
        """Short-circuit on single bools; elementwise (both sides evaluated) when the left side
        is a bool matrix, so masks combine: x[x > 2 and x < 5]."""
        left = self.eval(node.left, env)
        if is_mask(left):
            return logical_mask(node, left, self.eval(node.right, env))
        left = condition_value(left, node.left.span, f"'{node.op}' operand")
        if node.op == "and":
            return left and self.condition(node.right, env, "'and' operand")
        return left or self.condition(node.right, env, "'or' operand")

    def eval_unary(self, node, env):
        return unary(node.op, self.eval(node.operand, env), node.span)

    def eval_binary(self, node, env):
        dispatch = self.dispatch
        left, right = node.left, node.right
        # the commonest operands inline: a name in the innermost scope, a number literal
        tl = type(left)
        if tl is A.Name and left.name in env.vars:
            a = env.vars[left.name]
        else:
            a = dispatch[tl](left, env)
        tr = type(right)
        if tr is A.Number:
            b = right.value
        elif tr is A.Name and right.name in env.vars:
            b = env.vars[right.name]
        else:
            b = dispatch[tr](right, env)
        ta, tb = type(a), type(b)
        if ta is float and tb is float:
            fast = FLOAT_OPS.get(node.op)
            if fast is not None:
                return fast(a, b)
        elif (ta is np.ndarray or ta is Box) and (tb is float or tb is np.ndarray or tb is Box):
            try:
                return BINARY[node.op](a, b)
            except Exception:
                pass               # binary() repeats it and says what went wrong
        return binary(node.op, a, b, node.op_span or node.span, range_note(left, right))

    def eval_transpose(self, node, env):
        return transpose(self.eval(node.operand, env), node.span)

    def eval_range(self, node, env):
        return self.range_plan(node, env).values()

    def range_plan(self, node, env):
        """The range a:s:b checked and planned (ranges.Range): a value asks it for the vector,
        a for loop walks it (a tracked start or step reaches every element; the end only sets
        the length)."""
        start, start_given = self.range_bound(node.start, env, "start", keep=True)
        stop = self.range_bound(node.stop, env, "end")
        step, step_given = ((1.0, 1.0) if node.step is None
                            else self.range_bound(node.step, env, "step", keep=True))
        plan = plan_range(start, step, stop, node.span)
        if type(start_given) is Box:
            plan.given_start = start_given
        if type(step_given) is Box:
            plan.given_step = step_given
        return plan

    def range_bound(self, node, env, what, keep=False):
        tracked = self.eval(node, env)
        v = raw(tracked)
        if isinstance(v, np.ndarray):
            if v.size == 1:
                v = float(v.reshape(()))
        elif type(v) in ARRAYS and math.prod(v.shape) == 1:    # another backend's 1-element matrix
            v = float(to_numpy(v).reshape(()))
        if not isinstance(v, (float, int)) or isinstance(v, bool):
            raise TypeErr(f"the {what} of a range must be a number, got {describe(v)}", node.span)
        return (float(v), tracked) if keep else float(v)

    def eval_field(self, node, env):
        return field(self.eval(node.obj, env), node.name, node.span)

    def eval_matrix(self, node, env):
        rows = [[self.eval(x, env) for x in row] for row in node.rows]
        if not rows:
            return new_matrix([], ops.FLOAT["dtype"])
        for row, row_nodes in zip(rows, node.rows):
            for v, n in zip(row, row_nodes):
                if not is_numeric(v):
                    raise TypeErr(f"a matrix holds numbers, got {describe(v)}", n.span)
        plain = all(type(v) is float for row in rows for v in row)
        if plain:
            if node.stacked:
                n0 = len(rows[0])
                for i, row in enumerate(rows):
                    if len(row) != n0:
                        raise ShapeError(f"the rows of a matrix literal differ in length: row 0 has {n0} "
                                         f"elements, row {i} has {len(row)}", node.span)
                return new_matrix(rows, ops.FLOAT["dtype"])
            return new_matrix(rows[0], ops.FLOAT["dtype"])
        try:
            built = [self.matrix_row(row) for row in rows]
            if not node.stacked:
                return built[0]
            built = [ops.reshape(r, shape=(1, -1)) if len(ops.shape_of(r)) < 2 else r for r in built]
            return ops.concat(*built, dim=0)
        except ValueErr as e:
            if getattr(e, "operation", None) is None:
                raise
            raise limits.elements_error(f"the matrix literal (a result of {shape_text(e.operation[1])})",
                                        e.operation[2]).with_span(node.span) from None
        except ValueError as e:
            raise ShapeError(f"cannot build the matrix: the pieces do not fit "
                             f"({'; '.join(', '.join(shape_text(ops.shape_of(v)) for v in row) for row in rows)})",
                             node.span) from e

    def matrix_row(self, row):
        shapes = [ops.shape_of(v) for v in row]
        if all(len(s) == 0 for s in shapes):
            if all(isinstance(raw(v), (bool, np.bool_)) for v in row):
                return new_matrix([bool(raw(v)) for v in row], np.bool_)
            return ops.stack(*row, dim=0)
        if len(row) == 1:
            return row[0]
        if any(len(s) >= 2 for s in shapes):
            parts = [ops.reshape(v, shape=(1, 1)) if len(s) == 0 else
                     ops.reshape(v, shape=(1, -1)) if len(s) == 1 else v for v, s in zip(row, shapes)]
            return ops.concat(*parts, dim=-1)
        parts = [ops.reshape(v, shape=(1,)) if len(s) == 0 else v for v, s in zip(row, shapes)]
        return ops.concat(*parts, dim=0)
