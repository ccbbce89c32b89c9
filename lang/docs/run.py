"""Running documentation code: examples in a fresh interpreter with captured output, the
figures they draw, and the gradient check of differentiable builtins (see tapeml.docs)."""
from __future__ import annotations

import contextlib
import io
import math
import os
import zlib
from dataclasses import dataclass, replace

import numpy as np

from tapeml.docs.collect import DocsError, Entry

GRAD_TOLERANCE = 1e-6


# ---- running code ----------------------------------------------------------------------------
@dataclass
class RunResult:
    output: str
    figures: list           # matplotlib figures left open
    error: str | None       # the rendered language error, if the code raised one


def echo_text(value) -> str:
    """A bare expression's echo: the REPL's display form for a terminal of 80x24 (values.py)."""
    from tapeml.values import display_value
    return display_value(value)


_TEMPLATE = []


def fresh_interpreter(out):
    """A new Interpreter with the stdlib prelude, without re-parsing stdlib/*.ml each time: the
    prelude's names are copied from one template interpreter (values are immutable)."""
    from tapeml.interpreter import Interpreter
    if not _TEMPLATE:
        template = Interpreter(out=io.StringIO())
        template.load_stdlib()
        _TEMPLATE.append(template)
    t = _TEMPLATE[0]
    interp = Interpreter(out=out, load_prelude=False)
    interp.progress_out = False      # examples draw no progress bar: the pages stay reproducible
    interp.prelude.vars.update(t.prelude.vars)
    interp.sources.update(t.sources)
    return interp


def reset_random(n: int = 0) -> None:
    """Seed tapeml's random generator (when the Random builtins exist) so pages are reproducible."""
    try:
        from tapeml.builtins import random as tr
    except ImportError:
        return
    if hasattr(tr, "seed"):
        tr.seed(n)


def run_code(source: str, filename: str, interp=None, shown: str | None = None) -> RunResult:
    """Run source with its output captured (in interp, or a fresh interpreter). `shown` is the
    text errors quote their source line from (default: source)."""
    from tapeml.builtins import plot
    from tapeml.errors import LangError, render
    buf = io.StringIO()
    if interp is None:
        interp = fresh_interpreter(buf)
        reset_random()
    else:
        interp.out = buf
    plot.close_all()

    def echo(v):
        buf.write(echo_text(v) + "\n")

    error = None
    with contextlib.redirect_stdout(buf):
        try:
            interp.run(source, filename, echo=echo)
        except LangError as e:
            if shown is not None:
                interp.sources[filename] = shown
            error = render(e, interp.sources)
        except RecursionError:
            error = "RecursionError: the program nests too deeply"
        except Exception as e:  # a bug in tapeml or in the example's builtin: report it, never drop it
            error = f"InternalError: {type(e).__name__}: {e}"
    return RunResult(buf.getvalue().rstrip("\n"), plot.open_figures(), error)


def save_figures(figures, img_dir: str, stem: str) -> list[str]:
    """Save figures as img_dir/stem.png (or stem-a.png, stem-b.png ...); the file names."""
    from tapeml.builtins import plot
    names = []
    if not figures:
        return names
    os.makedirs(img_dir, exist_ok=True)
    for k, fig in enumerate(figures):
        name = f"{stem}.png" if len(figures) == 1 else f"{stem}-{chr(ord('a') + k)}.png"
        plot.save_png(fig, os.path.join(img_dir, name))
        names.append(name)
    plot.close_all()
    return names


# ---- the gradient check ----------------------------------------------------------------------
DIFF_KINDS = ("array", "tree", "record", "tuple")


def _float_tree(v) -> bool:
    from tapeml.builtins.util import tree_leaves
    from tapeml.errors import LangError
    if v is None:
        return False
    try:
        return bool(tree_leaves(v, "x"))
    except LangError:
        return False


def gradient_check(entry: Entry, example: str, where: str) -> list[tuple[str, float | None]]:
    """[(parameter, largest relative error or None when it takes whole numbers only)]."""
    from tapeml import ops
    from tapeml.builtins.registry import REGISTRY, Builtin, P
    from tapeml.builtins.util import tree_leaves, tree_map
    from tapeml.errors import LangError, render
    from tapeml.tape import raw
    b = entry.builtin
    captured = []

    def recorder(*args):
        if not captured:
            captured.append([tree_map(raw, a) if not callable(a) else a for a in args])
        return b.fn(*args)

    interp = fresh_interpreter(io.StringIO())
    interp.base.vars[b.name] = replace(b, fn=recorder)
    reset_random()
    with contextlib.redirect_stdout(io.StringIO()):
        try:
            interp.run(example, f"<{entry.name} gradient check>")
        except LangError as e:
            raise DocsError(where, "the example raised during the gradient check:\n" + render(e, interp.sources))
    if not captured:
        raise DocsError(where, f"the first example never calls {entry.name}(), so its gradient cannot be checked")
    args = captured[0]
    offset = 1 if b.interp else 0
    positions = [i + offset for i, p in enumerate(b.params)
                 if (p.kind in DIFF_KINDS or p.variadic) and _float_tree(args[i + offset])]
    if not positions:
        raise DocsError(where, f"{entry.name}() is declared differentiable but its first example passes "
                               f"no float array argument to differentiate")
    reset_random(1)
    out = b.fn(*args)
    shapes = [np.shape(raw(v)) for _, v in tree_leaves(out, "result")]
    rng = np.random.default_rng(zlib.crc32(entry.name.encode()))
    weights = [rng.standard_normal(s) if s else float(rng.standard_normal()) for s in shapes]
    results = []
    for pos in positions:
        def objective(t, pos=pos):
            call = list(args)
            call[pos] = t
            reset_random(1)            # a random builtin (dropout) draws the same mask every call
            result = b.fn(*call)
            total = 0.0
            for (_, leaf), w in zip(tree_leaves(result, "result"), weights):
                total = ops.add(total, ops.sum_(ops.mul(leaf, w)))
            return total

        fobj = Builtin(f"{entry.name}_objective", "Autodiff", "", objective, [P("t")])
        name = b.params[pos - offset].name
        try:
            errs = REGISTRY["check_grad"].fn(interp, fobj, args[pos], 1e-6, 64)
        except LangError as e:
            if _whole_numbers(args[pos]) and e.kind in ("IndexError", "ValueError", "TypeError"):
                results.append((name, None))   # ids, labels, targets: not a differentiable input
                continue
            raise DocsError(where, f"check_grad on {name} raised:\n" + render(e, interp.sources))
        from tapeml.builtins.autodiff import _worse
        worst = 0.0
        for _, v in tree_leaves(errs, "err"):
            worst = _worse(worst, float(raw(v)))      # a nan is the worst error, never hidden
        results.append((name, worst))
    if all(e is None for _, e in results):
        raise DocsError(where, f"{entry.name}() is declared differentiable but no argument of its first "
                               f"example could be differentiated")
    return results


def _whole_numbers(v) -> bool:
    from tapeml.builtins.util import tree_leaves
    from tapeml.tape import raw
    return all(np.all(np.mod(np.asarray(raw(x), dtype=np.float64), 1.0) == 0) for _, x in tree_leaves(v, "x"))


def error_bound(err: float, previous: str | None = None) -> str:
    """The gradient check's figure as printed: the power of ten the error stays below ("< 1e-9"),
    or "0". The last digits of an error near 1e-10 are finite-difference rounding noise, which
    moves with the BLAS kernel and memory alignment from run to run; a decade is stable except
    near its edge, so the bound printed before (`previous`, "1e-9") is kept while it still holds
    and is at most 100 times the error: a rebuild then changes no page."""
    if err == 0:
        return "0"
    if previous is not None:
        try:
            old = float(previous)
        except ValueError:
            old = None
        if old is not None and old / 100 <= err < old <= GRAD_TOLERANCE:
            return f"< {previous}"
    return f"< {format_error(10.0 ** (math.floor(math.log10(err)) + 1))}"


def format_error(e: float) -> str:
    return "0" if e == 0 else f"{e:.0e}".replace("e-0", "e-").replace("e+0", "e+")

