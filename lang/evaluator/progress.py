"""Progress bars for long loops, drawn by tqdm: the `progress` builtin's loops, the docs build
and the benchmark.

Where a bar draws is decided in one place, `stream_for`:
- TAPEML_PROGRESS=0 (or off, false, no) turns every bar off;
- an interpreter whose `progress_out` is False draws none (the docs build runs its examples so,
  which keeps the pages reproducible);
- otherwise a bar writes to the interpreter's `progress_out` when a front end set one (a Jupyter
  kernel gives its own stream there), else to the process's standard error at that moment.
The stream then decides how (`Bar.mode`): a terminal (isatty) gets tqdm's live bar, redrawn in
place; anything else (a pipe, a file, CI) gets plain log lines, one per tenth of the count and
at least one every LOG_INTERVAL seconds, never a carriage return. A front end that renders '\\r'
in place (a notebook) gives a stream whose isatty() is true, one that does not gets the lines.

A bar counts a loop's steps (`track`), shows a note beside the count (`note`, tqdm's
set_postfix_str), and `close` always ends its line, however the loop ended (done, break, an
error, Ctrl-C). tqdm is imported when the first bar draws, never at start-up.
"""
from __future__ import annotations

import os
import sys
import time
from contextlib import contextmanager

LOG_INTERVAL = 30.0          # seconds: the longest a pipe waits for a line while a loop runs
LOG_FORMAT = "{desc}{percentage:3.0f}% {n_fmt}/{total_fmt} [{elapsed}<{remaining}, {rate_fmt}{postfix}]"
OFF = ("0", "off", "false", "no")
_TQDM = []


def enabled() -> bool:
    """False when TAPEML_PROGRESS turns bars off."""
    return os.environ.get("TAPEML_PROGRESS", "").strip().lower() not in OFF


def stream_for(interp=None):
    """The stream a bar of `interp` (or of a tool, with None) draws on, or None when bars are off."""
    if not enabled():
        return None
    out = getattr(interp, "progress_out", None)
    if out is False:
        return None
    return out if out is not None else sys.stderr


def is_terminal(stream) -> bool:
    try:
        return bool(stream.isatty())
    except (AttributeError, ValueError, OSError):
        return False


def _tqdm():
    """tqdm's class with its monitor thread off (a bar needs no thread; Ctrl-C stays simple)."""
    if not _TQDM:
        from tqdm import tqdm

        class Tqdm(tqdm):
            monitor_interval = 0
        _TQDM.append(Tqdm)
    return _TQDM[0]


class Bar:
    """A bar of `total` steps titled `desc` on `stream` (None: off; see the module docstring).
    With `delay` (seconds), nothing is drawn until the work has run that long: a builtin's bar
    (jacobian's backward passes) says nothing about work that ends sooner."""

    def __init__(self, total: int, desc: str = "", stream=None, delay: float = 0.0):
        self.total, self.desc, self.stream = int(total), desc, stream
        self.delay = delay
        self.n = 0
        self.items = None           # what a progress(...) loop walks (interpreter.eval_for)
        self.text = ""
        self.closed = False
        self.mode = "off" if stream is None else "live" if is_terminal(stream) else "log"
        if self.mode != "off":
            _tqdm()                 # imported before the clock starts
        if self.mode == "live":
            # the terminal's width, followed as it changes; 80 x 24 where it reports no size (a
            # bare pseudo-terminal, a front end's stream). leave=None: the outermost bar stays
            # on screen when done, nested ones are erased.
            try:
                cols = os.get_terminal_size(stream.fileno()).columns
            except (AttributeError, ValueError, OSError):
                cols = 0
            self.tq = _tqdm()(total=self.total, desc=desc or None, file=stream, leave=None,
                              dynamic_ncols=cols > 0, ncols=None if cols > 0 else 80,
                              nrows=None if cols > 0 else 24, delay=delay)
        elif self.mode == "log":
            self.start = self.last_t = time.monotonic()
            self.tenths = 0         # tenths of the count already logged
            self.logged = -1        # the count of the last line written

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()
        return False

    def track(self, items):
        """The items, counting a step each time the loop comes back for the next one."""
        if self.mode == "off":
            return items
        return self._track(items)

    def _track(self, items):
        update = self.update
        for item in items:
            yield item
            update()

    def update(self, n: int = 1) -> None:
        if self.mode == "live":
            self.tq.update(n)
        elif self.mode == "log":
            self.n += n
            now = time.monotonic()
            tenths = self.n * 10 // self.total if self.total > 0 else 0
            if self.delay and now - self.start < self.delay:
                self.tenths = tenths          # not yet
            elif (self.delay and self.logged < 0) or tenths > self.tenths or now - self.last_t >= LOG_INTERVAL:
                self.tenths = tenths
                self._log(now)

    def note(self, text: str) -> None:
        """Show `text` beside the count (the latest loss, say) from the next redraw on."""
        self.text = text
        if self.mode == "live":
            self.tq.set_postfix_str(text, refresh=False)

    def write(self, out, text: str) -> None:
        """Write `text` to `out` without tearing a live bar: the bars are cleared first and drawn
        again after."""
        if self.mode == "live" and not self.closed:
            with self.tq.external_write_mode(file=self.stream):
                out.write(text)
                out.flush()
        else:
            out.write(text)
            out.flush()

    def close(self) -> None:
        """End the bar's line (a last log line with the count reached, in log mode)."""
        if self.closed:
            return
        self.closed = True
        if self.mode == "live":
            self.tq.close()
        elif self.mode == "log" and self.logged != self.n:
            now = time.monotonic()
            if not (self.delay and self.logged < 0 and now - self.start < self.delay):
                self._log(now)

    def _log(self, now: float) -> None:
        fmt = _tqdm().format_meter
        prefix = f"{self.desc}: " if self.desc else ""
        if self.total > 0:
            line = fmt(self.n, self.total, now - self.start, prefix=prefix, postfix=self.text or None,
                       bar_format=LOG_FORMAT)
        else:
            line = prefix + f"{self.n}/0"
        self.logged, self.last_t = self.n, now
        try:
            self.stream.write(line.strip() + "\n")
            self.stream.flush()
        except (ValueError, OSError):   # the stream was closed: progress is not worth an error
            pass


class _OutAroundBar:
    """What a program prints while a live bar shares its terminal: whole lines go out with the
    bar cleared first and redrawn after; a partial line waits for its end (or the loop's)."""

    def __init__(self, out, bar: Bar):
        self.out, self.bar, self.pending = out, bar, ""

    def write(self, text: str) -> int:
        head, nl, self.pending = (self.pending + text).rpartition("\n")
        if nl:
            self.bar.write(self.out, head + nl)
        return len(text)

    def finish(self) -> None:
        if self.pending:
            self.out.write(self.pending)
            self.pending = ""

    def flush(self) -> None:
        self.out.flush()

    def __getattr__(self, name):
        return getattr(self.out, name)


WORK_DELAY = 2.0     # seconds a builtin's long loop runs before its bar appears


def work_bar(interp, total: int, desc: str) -> Bar:
    """The bar of a builtin's own long loop (the backward passes of jacobian and hessian, the
    evaluations of check_grad), drawn where a progress(...) loop's bar would be, and only once
    the loop has run WORK_DELAY seconds. Use it as a context manager; `update()` each step."""
    return Bar(total, desc, stream_for(interp), delay=WORK_DELAY)


@contextmanager
def loop_bar(interp, prog):
    """The bar of one `for` loop over prog (a values.Progress); progress_note writes to the
    innermost open one. While a live bar is drawn, interp.out keeps the bar whole (_OutAroundBar)."""
    bar = Bar(prog.count, prog.desc, stream_for(interp))
    bar.items = prog.items
    out = interp.out
    wrap = bar.mode == "live" and type(out) is not _OutAroundBar and is_terminal(out)
    if wrap:
        interp.out = _OutAroundBar(out, bar)
    interp.progress_bars.append(bar)
    try:
        yield bar
    finally:
        interp.progress_bars.pop()
        if wrap:
            interp.out.finish()
            interp.out = out
        bar.close()
