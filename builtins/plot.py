"""Plotting: thin builtins over matplotlib's pyplot.

matplotlib is imported lazily, on the first plotting call (DESIGN.md rule 10). Scripts and the docs
builder draw with the non-interactive Agg backend. In the REPL (`set_mode("repl")`, or when
tapeml.faces.repl is loaded) `show()` opens a window when a display is available and otherwise saves
a PNG and says where it went. In the Jupyter kernel (`set_publisher`) show() and the end of each
cell hand every open figure to the kernel as PNG bytes and close it. Figures are deterministic: a
fixed size, dpi and font (DejaVu Sans, shipped with matplotlib), no hinting-dependent layout, and
PNGs saved without the "Software" metadata, so rebuilding the docs gives byte-identical images with
the same matplotlib version."""
from __future__ import annotations

import os
import sys
import threading

import numpy as np

from tapeml.array import context
from tapeml.array.backend import to_numpy
from tapeml.builtins.files import WRITER_ERRORS, WRITER_HOW, atomic_write, resolve_path, shown_path
from tapeml.builtins.registry import REGISTRY, P, builtin, one_of, positive
from tapeml.syntax.errors import ShapeError, TypeErr, ValueErr
from tapeml.array.tape import raw
from tapeml.array.values import describe
from tapeml.array.printer import format_value

CAT = "Plotting"

FIGSIZE = (6.0, 4.0)        # inches
DPI = 100
PNG_METADATA = {"Software": None}   # matplotlib writes its version here otherwise
MAX_BINS = 1000             # hist: more bars than pixels draw slowly (10000 bins take 5 s)
MAX_INCHES = 100            # figure(): 10000 pixels a side at DPI

_pyplot = None
_mode = "script"            # "script", "docs" or "repl"
_shown = 0                  # PNGs written by show() without a display
_after_show = None          # after show(): the PNG paths it wrote ([] for a window); None once drawing resumes
_publisher = None           # a front end's figure sink (the Jupyter kernel): show() hands it each PNG


def _figure_state() -> tuple:
    """The live figures: mode, PNG counter, after-show state, pyplot's managers (the last current)."""
    figs = ()
    if _pyplot is not None:
        from matplotlib._pylab_helpers import Gcf
        figs = tuple(Gcf.figs.items())
    return (_mode, _shown, _after_show, figs)


def _install_figure_state(state: tuple) -> None:
    global _mode, _shown, _after_show
    _mode, _shown, _after_show, figs = state
    if _pyplot is not None or figs:
        from matplotlib._pylab_helpers import Gcf
        Gcf.figs.clear()
        Gcf.figs.update(figs)


# The figures are the current session's. pyplot keeps one list of figures per process, so they
# are a shared slot (lang/array/context.py): every plotting builtin (see the end of this file) and the
# functions marked below hold _FIGURES and claim the figures for the session that runs them.
_FIGURES = threading.RLock()
context.shared_slot("figures", _figure_state, _install_figure_state, lambda: ("script", 0, None, ()), _FIGURES)


def _holding_figures(fn):
    def run(*args, **kwargs):
        with _FIGURES:
            context.claim("figures")
            return fn(*args, **kwargs)
    return run


mode = _holding_figures(lambda: _mode)      # the current session's mode (see set_mode)


@_holding_figures
def set_mode(mode: str) -> None:
    """'script' (default), 'docs' (the docs builder: show() does nothing) or 'repl'."""
    global _mode
    if mode not in ("script", "docs", "repl"):
        raise ValueError(mode)
    _mode = mode


def _style() -> dict:
    return {"figure.figsize": FIGSIZE, "figure.dpi": DPI, "savefig.dpi": DPI,
            "font.family": "DejaVu Sans", "font.size": 10, "axes.titlesize": 11,
            "svg.hashsalt": "tapeml", "image.cmap": "viridis", "axes.grid": False,
            "figure.autolayout": False}


def plt():
    """pyplot, imported on first use with the Agg backend and the fixed style."""
    global _pyplot
    if _pyplot is None:
        import matplotlib
        if not os.environ.get("MPLBACKEND"):
            matplotlib.use("Agg")
        import matplotlib.pyplot as pyplot
        pyplot.rcParams.update(_style())
        import warnings     # matplotlib's warnings (singular limits, all-NaN data) carry file paths
        warnings.filterwarnings("ignore", module=r"matplotlib(\.|$)")
        warnings.filterwarnings("ignore", module=r"tapeml\.builtins\.plot$")
        _pyplot = pyplot
    return _pyplot


def loaded() -> bool:
    """True once a plotting builtin has imported matplotlib."""
    return _pyplot is not None


@_holding_figures
def close_all() -> None:
    global _after_show
    _after_show = None
    if _pyplot is not None:
        _pyplot.close("all")


def set_publisher(publish) -> None:
    """Route show() to `publish(png_bytes)`, one call per open figure (the Jupyter kernel shows
    them inline); None restores windows and files."""
    global _publisher
    _publisher = publish


@_holding_figures
def publish_open() -> int:
    """Hand each open figure to the publisher as PNG bytes, in creation order, and close them
    all (the kernel calls it after each cell, so no figure stays open between cells). Returns
    how many were published."""
    import io
    figures = open_figures()
    if _publisher is not None:
        for fig in figures:
            buf = io.BytesIO()
            save_png(fig, buf)
            _publisher(buf.getvalue())
    close_all()
    return len(figures)


@_holding_figures
def open_figures() -> list:
    """The open figures, in the order they were created (the docs builder saves them)."""
    if _pyplot is None:
        return []
    return [_pyplot.figure(n) for n in _pyplot.get_fignums()]


def save_png(fig, path: str) -> None:
    """Save one figure as a deterministic PNG, laid out so that subplots' labels do not overlap."""
    import warnings
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")        # tight_layout warns on axes it cannot fit; harmless
        fig.tight_layout()
    fig.savefig(path, format="png", dpi=DPI, metadata=PNG_METADATA)


def _vec(v, fname: str, pname: str) -> np.ndarray:
    r = to_numpy(raw(v))
    if isinstance(r, (float, int)) and not isinstance(r, bool):
        return np.array([float(r)])
    if not isinstance(r, np.ndarray):
        raise TypeErr(f"{fname}(): {pname} must be a vector of numbers, got {describe(v)}")
    if r.ndim > 1 and min(r.shape) == 1:
        r = r.reshape(-1)
    if r.ndim != 1:
        raise ShapeError(f"{fname}(): {pname} must be a vector, got {describe(v)}")
    return r.astype(np.float64)


def _xy(fname, x, y):
    if y is None:
        yv = _vec(x, fname, "y")
        return np.arange(len(yv), dtype=np.float64), yv
    xv, yv = _vec(x, fname, "x"), _vec(y, fname, "y")
    if len(xv) != len(yv):
        raise ShapeError(f"{fname}(): x has {len(xv)} points and y has {len(yv)}; they must match")
    return xv, yv


def _fresh() -> None:
    """After show(), the next drawing starts a new figure (the shown one stays in its window),
    so a session draws the same figures as the same code run as a script."""
    global _after_show
    if _after_show is not None:
        _after_show = None
        if plt().get_fignums():
            plt().figure()


def _ax():
    _fresh()
    return plt().gca()


def _text(fname, s):
    if not isinstance(raw(s), str):
        raise TypeErr(f"{fname}() needs a string, got {describe(s)}")
    return raw(s)


LABEL = P("label", "string", None, doc="the name shown by legend()")


@builtin("plot", CAT, "Draw a line: plot(y) against 0, 1, 2, ..., or plot(x, y).",
         [P("x", "array", shape="[N]", doc="the x values, or the y values when y is omitted"),
          P("y", "array", None, shape="[N]", doc="the y values"), LABEL],
         returns="none",
         what="A line through the points (x[i], y[i]) on the current axes; several calls draw several "
              "lines on the same axes, each in the next colour of the cycle.",
         how="matplotlib's `Axes.plot`. With one argument the x values are the positions 0 to N-1, "
             "matching tapeml's 0-based indexing.",
         errors=["ShapeError when x and y differ in length or are not vectors"],
         examples=["plot([1, 4, 9, 16, 25])",
                   'x = linspace(0, 2 * pi(), 50)\nplot(x, sin(x), label="sin")\n'
                   'plot(x, cos(x), label="cos")\nlegend()\ntitle("two waves")'])
def plot(x, y, label):
    xv, yv = _xy("plot", x, y)
    _ax().plot(xv, yv, label=label)


@builtin("scatter", CAT, "Draw the points (x[i], y[i]) as unconnected markers.",
         [P("x", "array", shape="[N]"), P("y", "array", shape="[N]"), LABEL],
         returns="none",
         what="One marker per point (x[i], y[i]), with no line between them, e.g. embeddings projected to "
              "two dimensions. Each call adds its points to the current axes in the next colour.",
         how="matplotlib's `Axes.scatter` with its default marker size.",
         errors=["ShapeError when x and y differ in length or are not vectors",
                 "TypeError when x or y is not a number or matrix"],
         examples=["scatter([0, 1, 2, 3], [1, 3, 2, 4])"])
def scatter(x, y, label):
    xv, yv = _xy("scatter", x, y)
    _ax().scatter(xv, yv, label=label)


@builtin("hist", CAT, "Histogram of the elements of x (all of them, whatever the shape).",
         [P("x", "array", shape="any", doc="the values; a matrix is flattened"),
          P("bins", "int", 10, doc="number of equal-width bins", check=lambda v: None if 0 < v <= MAX_BINS else
            f"must be between 1 and {MAX_BINS}", constraint=f"1 <= bins <= {MAX_BINS}"),
          LABEL],
         returns="none",
         what="How the values of x are distributed: their range is cut into `bins` equal intervals and each "
              "bar counts the elements in one, e.g. activations before and after layer_norm.",
         how="matplotlib's `Axes.hist`: the range min(x)..max(x) cut into `bins` equal intervals, each "
             "bar as high as the count of elements inside it. NaN and +-inf elements are left out.",
         errors=["TypeError when x is not a number or matrix",
                 f"ValueError when bins is not between 1 and {MAX_BINS}, or the values span too narrow a range "
                 "for that many bins"],
         examples=["hist([1, 2, 2, 3, 3, 3, 4, 4, 5], bins=5)"])
def hist(x, bins, label):
    r = to_numpy(raw(x))
    v = np.asarray(r, dtype=np.float64).reshape(-1)
    v = v[np.isfinite(v)]                   # NaN and +-inf have no bin
    if v.size:
        lo, hi = float(v.min()), float(v.max())
        if lo == hi:
            lo, hi = lo - 0.5, hi + 0.5     # one value: a bin of width 1 around it, as NumPy does
        edges = np.linspace(lo / 2, hi / 2, bins + 1) * 2      # halved: hi - lo may overflow
        edges[0], edges[-1] = lo, hi
        if not (np.all(np.isfinite(edges)) and np.all(np.diff(edges) > 0)):
            raise ValueErr(f"hist(): the values span too narrow a range ({format_value(hi - lo)}) "
                           f"for {bins} bins")
    else:
        edges = bins
    _ax().hist(v, bins=edges, label=label, alpha=0.75 if label else 1.0)


@builtin("bar", CAT, "Bar chart: one bar per element of heights, at positions 0, 1, 2, ...",
         [P("heights", "array", shape="[N]"),
          P("labels", "tuple", None, doc="a tuple of N strings written under the bars"), LABEL],
         returns="none",
         what="One bar per number, at positions 0, 1, 2, ..., optionally named by labels, e.g. the "
              "probability of each token of a small vocabulary.",
         how="matplotlib's `Axes.bar` at positions 0..N-1 (0-based, like indexing).",
         errors=["ValueError when labels does not have one string per bar",
                 "ShapeError when heights is not a vector", "TypeError when heights is not a number or matrix"],
         examples=['bar([3, 1, 2], labels=("a", "b", "c"))'])
def bar(heights, labels, label):
    h = _vec(heights, "bar", "heights")
    ax = _ax()
    ax.bar(np.arange(len(h)), h, label=label)
    if labels is not None:
        if len(labels) != len(h) or not all(isinstance(s, str) for s in labels):
            raise ValueErr(f"bar(): labels must be a tuple of {len(h)} strings, got {describe(labels)}")
        ax.set_xticks(np.arange(len(h)), list(labels))


@builtin("imshow", CAT, "Show a matrix as a heat map with a colour bar; ticks mark row and column positions.",
         [P("m", "array", shape="[R, C]", doc="the matrix; row 0 is drawn at the top"),
          P("colorbar", "bool", True, doc="draw the colour bar that maps colours to values")],
         returns="none",
         what="The picture of a matrix: one cell per element, coloured by value. Made for attention "
              "weights: rows are queries, columns are keys, and the ticks are the positions 0, 1, 2, ...",
         how="matplotlib's `Axes.imshow` with the viridis colour map and nearest-neighbour cells, integer "
             "ticks at every position (up to 20 per axis, then evenly spaced), and `Figure.colorbar`.",
         errors=["ShapeError when m is not a matrix, or is empty",
                 "ValueError when max(m) - min(m) overflows (values near +-1e308)"],
         examples=["imshow([1, 2, 3; 4, 5, 6])",
                   "x = [1.0, 0.5; -0.5, 1.0; 0.2, -0.3]\nimshow(softmax(x @ x' / sqrt(2)))\n"
                   'title("attention weights")\nxlabel("key")\nylabel("query")'])
def imshow(m, colorbar):
    r = to_numpy(raw(m))
    if isinstance(r, np.ndarray) and r.ndim == 1:
        r = r.reshape(1, -1)
    if not isinstance(r, np.ndarray) or r.ndim != 2:
        raise ShapeError(f"imshow(): m must be a matrix, got {describe(m)}")
    if r.size == 0:
        raise ShapeError(f"imshow(): m is empty ({describe(m)}); there is nothing to draw")
    finite = np.asarray(r, dtype=np.float64)[np.isfinite(r)]
    if finite.size and not np.isfinite(finite.max() - finite.min()):
        raise ValueErr(f"imshow(): the values span more than the float range ({format_value(finite.min())} "
                       f"to {format_value(finite.max())}); scale them first")
    ax = _ax()
    fig = ax.figure
    im = ax.imshow(np.asarray(r, dtype=np.float64), interpolation="nearest", aspect="auto")
    for n, setter in ((r.shape[1], ax.set_xticks), (r.shape[0], ax.set_yticks)):
        step = 1 if n <= 20 else int(np.ceil(n / 10))
        setter(np.arange(0, n, step))
    if colorbar:
        fig.colorbar(im, ax=ax)


@builtin("title", CAT, "Set the title of the current axes.", [P("text", "string")], returns="none",
         what="Writes a heading above the current axes (the last subplot selected); a second call replaces it.",
         errors=["TypeError when text is not a string"],
         how="matplotlib's `Axes.set_title`.", examples=['plot([1, 2, 3])\ntitle("a line")'])
def title(text):
    _ax().set_title(text)


@builtin("xlabel", CAT, "Label the x axis of the current axes.", [P("text", "string")], returns="none",
         what="Names the horizontal axis of the current axes, e.g. \"step\" or \"key position\".",
         errors=["TypeError when text is not a string"],
         how="matplotlib's `Axes.set_xlabel`.", examples=['plot([1, 2, 3])\nxlabel("step")'])
def xlabel(text):
    _ax().set_xlabel(text)


@builtin("ylabel", CAT, "Label the y axis of the current axes.", [P("text", "string")], returns="none",
         what="Names the vertical axis of the current axes, e.g. \"loss\" or \"query position\".",
         errors=["TypeError when text is not a string"],
         how="matplotlib's `Axes.set_ylabel`.", examples=['plot([1, 2, 3])\nylabel("loss")'])
def ylabel(text):
    _ax().set_ylabel(text)


@builtin("legend", CAT, "Show a legend of the labelled lines, points and bars of the current axes.",
         [], returns="none",
         what="A box on the current axes listing every label= given to plot, scatter, hist or bar, next to "
              "its colour. Call it after drawing.",
         how="matplotlib's `Axes.legend` at the best location.",
         errors=["ValueError when nothing on the axes has a label"],
         examples=['plot([1, 2, 3], label="up")\nplot([3, 2, 1], label="down")\nlegend()'])
def legend():
    ax = _ax()
    handles, _ = ax.get_legend_handles_labels()
    if not handles:
        raise ValueErr("legend(): nothing on these axes has a label; pass label=\"...\" to plot, "
                       "scatter, hist or bar")
    ax.legend(loc="best")


def _inches(v):
    return None if 0 < v <= MAX_INCHES else f"must be > 0 and at most {MAX_INCHES} (inches)"


@builtin("figure", CAT, "Start a new, empty figure; later drawing goes there.",
         [P("width", "number", FIGSIZE[0], doc="inches", check=_inches, constraint=f"0 < width <= {MAX_INCHES}"),
          P("height", "number", FIGSIZE[1], doc="inches", check=_inches, constraint=f"0 < height <= {MAX_INCHES}")],
         returns="none",
         what="Each figure is one picture (one PNG). Without figure(), the first drawing call opens one.",
         how="matplotlib's `pyplot.figure` with the fixed dpi.",
         errors=[f"ValueError when width or height is not > 0 and at most {MAX_INCHES} inches"],
         examples=["figure(width=4, height=2)\nplot([0, 1, 0, 1])"])
def figure(width, height):
    global _after_show
    _after_show = None
    plt().figure(figsize=(width, height), dpi=DPI)



@builtin("subplot", CAT, "Split the figure into a rows x cols grid and draw in cell index (0-based, row by row).",
         [P("rows", "int", check=positive, constraint="> 0"), P("cols", "int", check=positive, constraint="> 0"),
          P("index", "int", doc="0 is the top left cell; counts along each row",
            constraint="0 <= index < rows * cols")],
         returns="none",
         what="Several plots in one figure: the figure is divided into a rows x cols grid and cell index "
              "becomes the current axes, where the following drawing calls go.",
         how="matplotlib's `pyplot.subplot(rows, cols, index + 1)`: the index is 0-based like every "
             "index in tapeml.",
         errors=["IndexError when index is outside the grid", "ValueError when rows or cols <= 0"],
         examples=['subplot(1, 2, 0)\nplot([1, 2, 3])\ntitle("left")\nsubplot(1, 2, 1)\n'
                   'plot([3, 2, 1])\ntitle("right")'])
def subplot(rows, cols, index):
    from tapeml.syntax.errors import IndexErr
    if not 0 <= index < rows * cols:
        raise IndexErr(f"subplot(): index {index} is outside a {rows}x{cols} grid "
                       f"(0 to {rows * cols - 1})")
    _fresh()
    plt().subplot(rows, cols, index + 1)


@builtin("savefig", CAT, "Save the current figure to a PNG file.",
         [P("path", "string", doc="the file to write; .png is added when the name has no extension")],
         returns="none",
         what="Writes the current figure to a PNG file (a loss curve at the end of training) and prints where, "
              "relative to the current directory (a script's relative path starts at its own folder). The figure "
              "stays open to draw on and save again; after show() has saved and closed the figures (no display), "
              "savefig warns and writes nothing: call it before show().",
         how="matplotlib's `Figure.savefig` as PNG with fixed dpi and without the software-version "
             "metadata, so saving the same drawing twice gives the same bytes. " + WRITER_HOW,
         errors=[WRITER_ERRORS, "ValueError when the name ends in another extension (.jpg, .pdf, ...)"],
         examples=['plot([1, 2, 3])\nsavefig("line.png")'], context=True)
def savefig(ctx, path):
    if _after_show:     # show() saved and closed the figures: the current one would be blank
        where = ", ".join(_after_show)
        sys.stderr.write(f"warning: savefig(): the figure was already shown (show() saved it to {where} "
                         f"and closed it); nothing was written to '{path}'. Call savefig before show()\n")
        return
    ext = os.path.splitext(path)[1].lower()
    if ext and ext != ".png":
        raise ValueErr(f"savefig(): figures are written as PNG; name the file '{os.path.splitext(path)[0]}.png' "
                       f"instead of '{path}'")
    if not ext:
        path += ".png"
    path = resolve_path(ctx, path)      # a relative path starts at the script's directory, as every writer's
    fig = plt().gcf()
    try:
        atomic_write("savefig", path, lambda f: save_png(fig, f), binary=True)
    except (ValueError, OverflowError, RuntimeError, MemoryError):     # the drawing itself failed
        raise ValueErr("savefig(): the figure cannot be drawn: its values or sizes are out of the range "
                       "a picture can show (near +-1e308, or too many points)") from None
    ctx.out.write(f"figure saved to {shown_path(path)}\n")


def _display_available() -> bool:
    if sys.platform in ("darwin", "win32"):
        return True
    return bool(os.environ.get("DISPLAY") or os.environ.get("WAYLAND_DISPLAY"))


def _to_window() -> bool:
    """Switch pyplot to an interactive backend (REPL with a display); False when none works."""
    p = plt()
    if p.get_backend().lower() != "agg":
        return True
    for backend in ("QtAgg", "TkAgg", "GTK4Agg", "GTK3Agg", "MacOSX", "WXAgg"):
        try:
            p.switch_backend(backend)
            return True
        except Exception:  # the toolkit is not installed: try the next one
            continue
    p.switch_backend("Agg")
    return False


@builtin("show", CAT, "Show the figures: a window in the REPL when a display exists, images in a notebook, otherwise a PNG file.",
         [], returns="none", context=True,
         what="In the REPL with a display, opens the drawn figures in a window and returns at once. In a Jupyter "
              "notebook (the tapeml kernel), shows each figure as an image below the cell and closes it; the "
              "figures still open when a cell ends are shown the same way. "
              "Elsewhere (scripts, no display) saves each figure as a PNG in the current directory "
              "(tapeml-figure-1.png, then the next free number) and prints where; the docs builder captures "
              "figures itself, so there show() does nothing. After show(), the next drawing starts a new "
              "figure, so a session draws the same figures as the script.",
         errors=["TypeError when given an argument: show() takes none"],
         how="pyplot's `show(block=False)` on an interactive backend (Qt, Tk, GTK, macOS, in that order); "
             "otherwise `savefig` to tapeml-figure-N.png in the current directory (the temporary directory "
             "when that cannot be written). The figures are closed after saving.",
         examples=["plot([1, 2, 3])\nshow()"])
def show(ctx):
    global _shown, _after_show
    if _pyplot is None or not _pyplot.get_fignums():
        return None
    if _mode == "docs":
        return None
    if _publisher is not None:      # the Jupyter kernel: inline images
        publish_open()
        _after_show = []
        return None
    repl = _mode == "repl" or "tapeml.faces.repl" in sys.modules
    if repl and _display_available() and _to_window():
        _pyplot.show(block=False)
        _pyplot.pause(0.001)
        _after_show = []
        return None
    paths = []
    for fig in open_figures():
        path = _next_figure_path()
        atomic_write("show", path, lambda f, fig=fig: save_png(fig, f), binary=True)   # as savefig writes
        paths.append(path)
        ctx.out.write(f"figure saved to {path}\n")
    close_all()
    _after_show = paths
    return None


def _next_figure_path() -> str:
    """tapeml-figure-N.png in the current directory, N the next number not taken (so no file is
    overwritten); in the temporary directory when the current one cannot be written."""
    global _shown
    folder = os.getcwd()
    if not os.access(folder, os.W_OK):
        import tempfile
        folder = tempfile.gettempdir()
    while True:
        _shown += 1
        path = os.path.join(folder, f"tapeml-figure-{_shown}.png")
        if not os.path.exists(path):
            return path


# ---- axis scales and limits (issue 20) -------------------------------------------------------

@builtin("yscale", CAT, 'Set the scale of the y axis of the current axes: "linear", "log" or "symlog".',
         [P("kind", "string", doc='"linear", "log" (base 10) or "symlog"',
            check=one_of("linear", "log", "symlog"), constraint='one of "linear", "log", "symlog"'),
          P("linthresh", "number", 2.0, doc='symlog only: the range (-linthresh, linthresh) is drawn linearly',
            check=positive, constraint="> 0")],
         returns="none",
         what="A loss curve that falls from 10 to 0.01 is a flat line after its first steps on a linear axis; "
              'yscale("log") spreads every factor of 10 evenly. "symlog" is logarithmic away from 0 on both '
              "sides and linear near 0, for values of both signs (gradients, updates).",
         how='matplotlib\'s `Axes.set_yscale` (MATLAB: `set(gca, "YScale", "log")`). On a log axis points '
             "with y <= 0 cannot be drawn and are left out (matplotlib's clipping); symlog's linear range "
             "is matplotlib's default, |y| < 2, unless linthresh says otherwise.",
         errors=['ValueError when kind is not "linear", "log" or "symlog", or linthresh <= 0'],
         examples=['steps = 1:200\nplot(steps, 10 * exp(-steps / 30) + 0.01, label="loss")\nyscale("log")\n'
                   'xlabel("step")\nylabel("loss (log scale)")',
                   'x = linspace(-50, 50, 201)\nplot(x, x^3)\nyscale("symlog", linthresh=10)\n'
                   'title("x^3 on a symlog axis")'])
def yscale(kind, linthresh):
    ax = _ax()
    if kind == "symlog":
        ax.set_yscale("symlog", linthresh=float(linthresh))
    else:
        ax.set_yscale(kind)


def _limits(fname: str, axis: str, lo, hi):
    for name, v in (("lo", lo), ("hi", hi)):
        if v is not None and not np.isfinite(v):
            raise ValueErr(f"{fname}(): {name} must be a finite number, got {format_value(v)}")
    ax = _ax()
    cur = ax.get_ylim() if axis == "y" else ax.get_xlim()
    elo, ehi = (float(cur[0]) if lo is None else lo), (float(cur[1]) if hi is None else hi)
    if not elo < ehi:
        kept = "" if lo is not None and hi is not None else " (a side given as none keeps its current value)"
        raise ValueErr(f"{fname}(): lo must be less than hi, got lo = {format_value(elo)}, "
                       f"hi = {format_value(ehi)}{kept}")
    scale = ax.get_yscale() if axis == "y" else ax.get_xscale()
    if scale == "log" and any(v is not None and v <= 0 for v in (lo, hi)):
        raise ValueErr(f"{fname}(): the {axis} axis is logarithmic, so its limits must be > 0, got "
                       f"lo = {format_value(lo)}, hi = {format_value(hi)}")
    (ax.set_ylim if axis == "y" else ax.set_xlim)(None if lo is None else float(lo),
                                                  None if hi is None else float(hi))


_LIM_ERRORS = ["ValueError when lo >= hi, or a limit is not finite",
               "ValueError when the axis is logarithmic and a limit is <= 0"]


@builtin("xlim", CAT, "Set the range of the x axis of the current axes: xlim(lo, hi); none keeps that side.",
         [P("lo", "number", None, doc="the left end (none: keep the current one)"),
          P("hi", "number", None, doc="the right end (none: keep the current one)")],
         returns="none",
         what="Zooms the current axes to x in [lo, hi]: the first steps of a training curve, or one region "
              "of a function. Data outside the range is cut off, not removed.",
         how="matplotlib's `Axes.set_xlim` (MATLAB's `xlim([lo hi])`); a side given as none keeps its "
             "current value. lo must be less than hi (matplotlib would flip the axis; MATLAB refuses, and so does tapeml).",
         errors=_LIM_ERRORS,
         examples=["x = linspace(0, 10, 101)\nplot(x, sin(x))\nxlim(0, 3.14)\ntitle(\"sin(x) on [0, pi]\")"])
def xlim(lo, hi):
    _limits("xlim", "x", lo, hi)


@builtin("ylim", CAT, "Set the range of the y axis of the current axes: ylim(lo, hi); none keeps that side.",
         [P("lo", "number", None, doc="the bottom (none: keep the current one)"),
          P("hi", "number", None, doc="the top (none: keep the current one)")],
         returns="none",
         what="Fixes the vertical range, so that a spike does not squash the rest of a curve, or several "
              "figures share one scale.",
         how="matplotlib's `Axes.set_ylim` (MATLAB's `ylim([lo hi])`); a side given as none keeps its "
             "current value. lo must be less than hi, and on a log axis both must be > 0.",
         errors=_LIM_ERRORS,
         examples=["plot([1, 2, 50, 3, 2, 1])\nylim(0, 5)\ntitle(\"the spike is cut off at 5\")",
                   "plot([0.5, 1, 2])\nylim(lo=0)"])
def ylim(lo, hi):
    _limits("ylim", "y", lo, hi)


for _b in REGISTRY.values():    # every plotting builtin holds its session's figures: one place, none forgets
    if _b.category == CAT:
        _b.fn = _holding_figures(_b.fn)
