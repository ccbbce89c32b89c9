"""progress and progress_note: a live bar (tqdm) over a `for` loop, on standard error.

`progress(items)` returns a values.Progress; the interpreter's `for` walks its items exactly as
it walks the bare items (the same items, tracked ones still tracked) while lang/progress.py
draws the bar. The stream and the mode (live bar, log lines, off) are chosen there.
"""
from __future__ import annotations

import numpy as np

from tapeml.builtins.registry import P, builtin
from tapeml.errors import TypeErr
from tapeml.tape import raw
from tapeml.values import Progress, describe, format_value


def loop_length(items) -> int:
    """The number of steps a `for` loop over items takes; a TypeErr for what it cannot loop over."""
    r = raw(items)
    if isinstance(r, np.ndarray):
        return 1 if r.ndim == 0 else r.shape[0]
    if isinstance(r, (tuple, str)):
        return len(r)
    if isinstance(r, (float, int)) and not isinstance(r, (bool, np.bool_)):
        return 1
    raise TypeErr(f"progress(): cannot loop over {describe(items)}; give a range, a matrix, "
                  f"a tuple or a string")


@builtin("progress", "Core", "Loop with a live progress bar: for step in progress(1:n, desc=\"train\") ... end.",
         [P("items", doc="what the loop walks: a range, a matrix (its rows), a tuple or a string"),
          P("desc", "string", "", doc="a title shown before the bar")],
         returns="a progress(...) loop, for a `for` loop to walk",
         what="Wraps what a `for` loop walks so that the loop draws a bar on standard error with the "
              "count done, the rate and the time left; `progress_note(text)` shows text beside it "
              "(the latest loss, say). The loop itself is unchanged: the same items in the same order "
              "(rows of a tracked matrix stay tracked inside `grad`), and `break`, `continue` and "
              "errors behave as in the bare loop. Standard output is untouched, so a program prints "
              "the same with or without it.",
         how="Built on tqdm. Standard error decides the look: a terminal gets tqdm's live bar, "
             "redrawn in place (lines printed meanwhile appear above it); a pipe, a file or CI gets a "
             "plain line such as `train:  50% 5/10 [00:01<00:01, 4.98it/s, loss 1.2]` at every "
             "tenth of the count and at least every 30 seconds, never a carriage return. "
             "`TAPEML_PROGRESS=0` in the environment turns bars off; the docs are built with them "
             "off, so the examples on this page show only what they print. When the loop ends (done, "
             "`break`, an error, Ctrl-C) the bar's line is closed; after Ctrl-C in the REPL the "
             "variables keep the values they had.",
         errors=["TypeError when items is something a for loop cannot walk (a record, a function, a bool)"],
         examples=['total = 0\nfor step in progress(1:100, desc="sum")\n    total = total + step\n'
                   '    progress_note("total {total}")\nend\ntotal',
                   'progress(1:10, desc="train")'],
         interp=True)
def progress(interp, items, desc):
    return Progress(items, desc, loop_length(items))


@builtin("progress_note", "Core", "Show a short text beside the progress bar of the loop running (e.g. the loss).",
         [P("text", doc="a string, or any value (shown as print shows it)")],
         returns="none",
         what="Sets the note shown after the count of the innermost `for step in progress(...)` loop "
              "running, tqdm's postfix: call it in the loop with the latest loss. The bar shows the "
              "newest note at its next redraw. Outside such a loop, or with bars off, it does nothing, "
              "so the same code runs anywhere.",
         how="tqdm's `set_postfix_str` on the live bar; in log lines (standard error not a terminal) "
             "the note ends each line.",
         errors=["none: any value is accepted"],
         examples=['for step in progress(1:3, desc="train")\n    loss = 1 / step\n'
                   '    progress_note("loss {round(loss, 3)}")\nend\nloss'],
         interp=True)
def progress_note(interp, text):
    bars = interp.progress_bars
    if bars:
        bars[-1].note(text if isinstance(text, str) else format_value(text))
    return None
