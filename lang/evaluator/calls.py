"""The evaluator's calls and imports: a call expression, the one call path for every Callable
(user functions through the binder and a new scope, builtins through their own call), and
`import("file.ml")`. A part of the Interpreter class (lang/evaluator/interpreter.py), kept in its own
module by job."""
from __future__ import annotations

import os


from tapeml.syntax.errors import IOErr, LangError, RecursionErr, TypeErr, ValueErr
from tapeml.syntax.lexer import decode_source
from tapeml.builtins.files import link_trouble
from tapeml.evaluator import compiler
from tapeml.evaluator.scope import MAX_DEPTH, Env, ReturnSignal, called_from, too_deep
from tapeml.evaluator.stack import HOP_DEPTH, run_deep
from tapeml.array.tape import raw
from tapeml.array.values import Callable, Function, Record, bind_arguments, describe, is_numeric


class Calls:
    """Interpreter methods for calls and imports (mixed into Interpreter)."""

    def eval_call(self, node, env):
        fn = self.eval(node.func, env)
        args = [self.eval(a, env) for a in node.args]
        kwargs = {k: self.eval(v, env) for k, v in node.kwargs} if node.kwargs else {}
        self.current_call = node
        return self.call(fn, args, kwargs, node.span)

    def call(self, fn, args, kwargs, span):
        """Call a tapeml function or builtin; errors get `span` (the call site)."""
        t = type(fn)       # (kept in a local: measurably faster than comparing type(fn) inline)
        if t is Function:
            return self.call_function(fn, args, kwargs, span)
        if isinstance(fn, Callable):
            return fn.call(self, args, kwargs, span)
        hint = "; to index a matrix write x[i]" if is_numeric(raw(fn)) and not isinstance(raw(fn), bool) else ""
        raise TypeErr(f"cannot call {describe(fn)}; only functions can be called{hint}", span)

    def call_function(self, fn: Function, args, kwargs, span):
        """Run a user function's body: compiled once (lang/evaluator/compiler.py) and called with
        its arguments, or walked in a new scope below the one it was defined in."""
        code = fn.code
        if code and not kwargs and self.compiled and len(args) == len(fn.params):
            # the hot path, compiled and called with its positional arguments (the same steps as below)
            depth = self.depth = self.depth + 1
            if depth <= MAX_DEPTH and depth % HOP_DEPTH:
                try:
                    return code(self, fn.env, *args)
                except LangError as e:
                    raise called_from(e, fn, span)
                except RecursionError:
                    raise too_deep(fn, span) from None
                finally:
                    self.depth -= 1 if self.depth > 0 else 0
            self.depth -= 1
        params = fn.params
        if code is None:
            code = fn.code = compiler.code_for(fn) or False
        if not self.compiled:           # a diagnostics mode is on: walk (lang/evaluator/instrument.py)
            code = False
        if len(args) > len(params):
            bind_arguments(fn, args, kwargs, {}, span)      # raises the binder's "takes n arguments"
        if code and not kwargs and len(args) == len(params):
            values = local = args           # the hot path: positional arguments, nothing to bind
        else:
            local = Env(fn.env)
            vars_ = local.vars
            for p, a in zip(params, args):      # the binder's first step, inlined: the hot path
                vars_[p.name] = a
            if kwargs or len(vars_) < len(params):
                bind_arguments(fn, args, kwargs, vars_, span, self.eval, local)     # keywords, defaults
            if code:
                values = [vars_[p.name] for p in params]
        self.depth += 1
        if self.depth > MAX_DEPTH:
            self.depth = 0
            raise RecursionErr(f"more than {MAX_DEPTH} nested calls (in {fn.name}); "
                               f"is a recursion missing its base case?", span)
        try:
            if code:
                if self.depth % HOP_DEPTH == 0:
                    # every HOP_DEPTH nested calls, the rest goes on a fresh thread (lang/evaluator/stack.py)
                    return run_deep(code, self, fn.env, *values)
                return code(self, fn.env, *values)
            if self.depth % HOP_DEPTH == 0:
                return run_deep(self.run_body, fn, local)
            return self.run_body(fn, local)
        except LangError as e:
            raise called_from(e, fn, span)
        except RecursionError:
            raise too_deep(fn, span) from None
        finally:
            self.depth -= 1 if self.depth > 0 else 0

    def run_body(self, fn: Function, local: Env):
        """A user function's body walked in its bound scope (here or on a deep thread)."""
        body = fn.body
        if type(body) is tuple:
            try:
                self.exec_block(body, local)
            except ReturnSignal as r:
                return r.value
            return None
        return self.eval(body, local)

    def eval_import(self, node, env):
        path = raw(self.eval(node.path, env))
        if not isinstance(path, str):
            raise TypeErr(f"import needs a file name string, got {describe(path)}", node.span)
        base = self.dir_stack[-1] if self.dir_stack else os.getcwd()
        full = os.path.abspath(os.path.join(base, path))
        if full in self.modules:
            return self.modules[full]
        real = os.path.realpath(full)      # a symlink to a file being imported is that file
        if real in self.importing:
            names = [_shown(f) for f in self.importing[self.importing.index(real):]]
            chain = (f"{names[0]} imports itself" if len(names) == 1 else
                     f"{names[0]} imports {names[1]}" + "".join(f", which imports {n}" for n in names[2:] + names[:1]))
            raise ValueErr(f"circular import of {full}: {chain}", node.span)
        if os.path.isdir(full):
            raise IOErr(f"import: {full} is a directory, not a file (from \"{path}\")", node.span)
        if not os.path.isfile(full):
            why = "no file" if not os.path.exists(full) else "not a regular file"
            trouble = link_trouble(full)        # a loop of links, a dangling link: say so, as load does
            raise IOErr(f"import: {why} at {full}{f': {trouble}' if trouble else ''} (from \"{path}\")",
                        node.span)
        try:
            with open(full, "rb") as f:
                data = f.read()
        except OSError as e:
            raise IOErr(f"import: cannot read {full}: {e.strerror or e}", node.span) from None
        module_env = Env(self.prelude)
        self.importing.append(real)
        shown = _shown(full)
        try:
            try:
                text = decode_source(data, shown)
            except LangError as e:
                self.sources[shown] = e.source
                raise
            self.run(text, shown, env=module_env)
        except LangError as e:
            e.add_call(f'import("{path}")', node.span)     # where the user's code imported it
            raise
        finally:
            self.importing.pop()
        record = Record(dict(module_env.vars))
        self.modules[full] = record
        return record


def _shown(full: str) -> str:
    """A file as errors name it, as the main script is named: relative to the current directory
    when it lies below it, else absolute (the module table keys stay absolute)."""
    cwd = os.getcwd()
    return os.path.relpath(full, cwd) if cwd != os.sep and full.startswith(os.path.join(cwd, "")) else full
