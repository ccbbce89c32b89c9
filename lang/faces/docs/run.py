"""Running documentation code: examples in a fresh tapeml Session with captured output, the
figures they draw, and the gradient check of differentiable builtins (see tapeml.faces.docs).

Every example (and every page of ```ml blocks) runs in a Session of its own (`fresh_session`):
its own variables and its own session state (float type, device, generator, notes,
diagnostics), entered while it runs (Session.entered), so nothing an example sets reaches the
next one, the builder, or any other face in the process."""
from __future__ import annotations

import contextlib
import io
import math
import os
import re
import zlib
from dataclasses import dataclass, replace

import numpy as np

from tapeml.faces.docs.collect import DocsError, Entry

GRAD_TOLERANCE = 1e-6
BOUND_KEEP = (3, 1000)  # a printed gradient bound is kept while 3 to 1000 times the error


# ---- running code ----------------------------------------------------------------------------
@dataclass
class RunResult:
    output: str
    figures: list           # matplotlib figures left open
    error: str | None       # the rendered language error, if the code raised one


def echo_text(value) -> str:
    """A bare expression's echo: the REPL's display form for a terminal of 80x24 (values.py)."""
    from tapeml.array.display import display_value
    return display_value(value)


_TEMPLATE = []


def fresh_session(out):
    """A new tapeml Session (a new session state: float64, TAPEML_DEVICE's device, notes on) whose
    interpreter has the stdlib prelude, without re-parsing stdlib/*.ml each time: the prelude's
    names are copied from one template interpreter (values are immutable)."""
    from tapeml.session.session import face_session
    if not _TEMPLATE:
        template = face_session(out=io.StringIO(), load_prelude=False)
        with template.entered():
            template.interp.load_stdlib()
        _TEMPLATE.append(template.interp)
    from tapeml.builtins import plot
    mode = plot.mode()          # the builder's figure mode ('docs' in a build: show() does nothing)
    session = face_session(out=out, load_prelude=False)
    session.interp.progress_out = False      # examples draw no progress bar: the pages stay reproducible
    session.interp.share_stdlib(_TEMPLATE[0])
    if mode != "script":
        with session.entered():
            plot.set_mode(mode)
    return session


def reset_random(n: int = 0) -> None:
    """Seed tapeml's random generator (when the Random builtins exist) so pages are reproducible."""
    try:
        from tapeml.builtins import random as tr
    except ImportError:
        return
    if hasattr(tr, "seed"):
        tr.seed(n)


def run_code(source: str, filename: str, session=None, shown: str | None = None) -> RunResult:
    """Run source with its output captured (in `session`, or a fresh Session). `shown` is the
    text errors quote their source line from (default: source)."""
    buf = io.StringIO()
    fresh = session is None
    if fresh:
        session = fresh_session(buf)
    with session.entered():
        if fresh:
            reset_random()
        try:
            return _run_code(session.interp, buf, source, filename, shown)
        finally:
            if fresh:
                finish(session)


def finish(session) -> None:
    """An example's (or a page's) Session is done: a diagnostics mode it turned on (check_nan,
    show_tape's recorder) goes off, so the tape's hook is left to no other."""
    with session.entered():
        session.interp.set_diagnostics(check_nan=False, profiler=None, recorder=None)


def _run_code(interp, buf, source, filename, shown) -> RunResult:
    from tapeml.array import context
    from tapeml.builtins import plot
    from tapeml.faces import runner
    interp.out = buf
    interp.err = buf                # notes (indexing.grid_note) show in the output, where they were printed
    context.LIVE["notes"] = True    # on for every example, whatever the environment or an earlier notes(false)
    plot.close_all()

    def echo(v):
        buf.write(echo_text(v) + "\n")

    with contextlib.redirect_stdout(buf):
        outcome = runner.run_cell(interp, source, filename, show=echo, ans=False, shown=shown)
    if outcome.status in (runner.INTERRUPTED, runner.TERMINATED):     # stops the build
        raise outcome.exception
    if outcome.status in (runner.MEMORY, runner.BROKEN_PIPE):   # a bug in tapeml or in the example's builtin
        error = runner.internal(outcome.exception).text
    else:
        error = outcome.text or None          # report it, never drop it
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


def same_png(a: str, b: str) -> bool:
    """Two PNG files show the same figure: equal bytes, or equal decoded pixels up to
    anti-aliasing noise (a matplotlib patch release must not fail `docs check`)."""
    with open(a, "rb") as fa, open(b, "rb") as fb:
        if fa.read() == fb.read():
            return True
    from tapeml.builtins import plot
    plot.plt()
    import matplotlib.image as mpimg
    try:
        x, y = mpimg.imread(a), mpimg.imread(b)
    except Exception:  # not a readable PNG
        return False
    if x.shape != y.shape:
        return False
    diff = np.abs(x.astype(np.float64) - y.astype(np.float64)).max(axis=-1)
    return float(np.mean(diff > 0.1)) < 0.002     # under 0.2% of pixels visibly different


# ---- the gradient check ----------------------------------------------------------------------
DIFF_KINDS = ("array", "numbers", "tree", "record", "tuple")


def _float_tree(v) -> bool:
    from tapeml.builtins.util import tree_leaves
    from tapeml.syntax.errors import LangError
    if v is None:
        return False
    try:
        return bool(tree_leaves(v, "x"))
    except LangError:
        return False


def gradient_check(entry: Entry, example: str, where: str) -> list[tuple[str, float | None]]:
    """[(parameter, largest relative error or None when it takes whole numbers only)], in a
    fresh Session whose `entry` builtin records the arguments of its first call."""
    from tapeml.builtins.util import tree_map
    from tapeml.array.tape import raw
    b = entry.builtin
    captured = []

    def recorder(*args):
        if not captured:
            captured.append([tree_map(raw, a) if not callable(a) else a for a in args])
        return b.fn(*args)

    session = fresh_session(io.StringIO())
    session.interp.set_variable(b.name, replace(b, fn=recorder))   # the example's calls are recorded
    try:
        with session.entered():
            return _gradient_check(entry, example, where, session.interp, captured)
    finally:
        finish(session)


def _gradient_check(entry, example, where, interp, captured):
    from tapeml.array import ops
    from tapeml.builtins.registry import REGISTRY, Builtin, P
    from tapeml.builtins.util import tree_leaves
    from tapeml.faces import runner
    from tapeml.syntax.errors import LangError, render
    from tapeml.array.tape import raw
    b = entry.builtin
    reset_random()
    with contextlib.redirect_stdout(io.StringIO()):
        outcome = runner.run_cell(interp, example, f"<{entry.name} gradient check>")
    if outcome.status == runner.ERROR:
        raise DocsError(where, "the example raised during the gradient check:\n" + outcome.text)
    if not outcome.ok:
        raise outcome.exception
    if not captured:
        raise DocsError(where, f"the first example never calls {entry.name}(), so its gradient cannot be checked")
    args = captured[0]
    offset = 1 if b.interp or b.context else 0
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
            errs = REGISTRY["check_grad"].fn(interp.context, fobj, args[pos], 1e-6, 64)
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
    from tapeml.array.tape import raw
    return all(np.all(np.mod(np.asarray(raw(x), dtype=np.float64), 1.0) == 0) for _, x in tree_leaves(v, "x"))


def error_bound(err: float, previous: str | None = None) -> str:
    """The gradient check's figure as printed: a power of ten the error stays below with a decade
    to spare ("< 1e-8" for an error of 3e-10; at most the tolerance, 1e-6), or "0". The digits of
    an error near 1e-10 are finite-difference rounding noise, which moves with the BLAS kernel,
    the CPU's SIMD and memory alignment (up to 2.5 times either way between the machines that
    `docs check` compares); the error's own decade would change the page whenever it sits near
    an edge (9.99e-11 printed "< 1e-10"). So the bound has room above the error (10 to 100 times
    it), and the bound printed before (`previous`, "1e-8") is kept while it is 3 to 1000 times the
    error (a tighter one is recomputed before another machine's noise can pass it): the page reads
    the same on another machine and on a rebuild."""
    if err == 0:
        return "0"
    if previous is not None:
        try:
            old = float(previous)
        except ValueError:
            old = None
        if old is not None and old / BOUND_KEEP[1] <= err <= old / BOUND_KEEP[0] and old <= GRAD_TOLERANCE:
            return f"< {previous}"
    decade = math.floor(math.log10(err))
    bound = 10.0 ** (decade + 2)
    if bound > GRAD_TOLERANCE:       # near the tolerance: the tolerance itself, if the error is below it
        bound = max(GRAD_TOLERANCE, 10.0 ** (decade + 1))
    return f"< {format_error(bound)}"


GRAD_ROW = re.compile(r"^(\| `[A-Za-z_0-9]+` \| )(?:< )?[-+.e0-9]+ \((passes|FAILS)\) \|$", re.M)


def normalize_page(text: str) -> str:
    """The page with the gradient errors' digits hidden (their pass/fail is kept)."""
    return GRAD_ROW.sub(lambda m: f"{m.group(1)}({m.group(2)}) |", text)


def format_error(e: float) -> str:
    return "0" if e == 0 else f"{e:.0e}".replace("e-0", "e-").replace("e+0", "e+")

