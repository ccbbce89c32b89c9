"""The backends' benchmark (issue 27): tapeml on a PyTorch device against PyTorch eager on the same
device, and minigpt's training steps per second. Run through `python tests/perf/bench.py --device
torch:cpu` (or torch:cuda); bench.py sets the threads before NumPy and PyTorch load.

Rows:
- the post-norm transformer block, forward + backward (value_and_grad of sum(block(x) * R)), float32,
  T = 512 and T = 128 at D = 512 (8 heads, hidden 4D), against nn.TransformerEncoderLayer's
  forward + backward with the same weights: the same kernels on both sides, so the ratio is the
  tape's and the interpreter's overhead;
- the same block on tapeml's NumPy backend (the CPU reference) when the device is not the CPU;
- minigpt's training step (examples' model: 2 pre-norm causal blocks, AdamW), steps per second
  on the device against PyTorch eager's same step.
Each figure is the median of rounds timed round-robin (one call of each side per round); on a
GPU every call ends with a synchronisation (the loss read back as a number).
"""
from __future__ import annotations

import statistics
import textwrap
import time

import numpy as np


def _timed(fns, repeat, sync, warmup=2):
    for _ in range(warmup):
        for f in fns:
            if f is not None:
                f()
                sync()
    times = [[] for _ in fns]
    for _ in range(repeat):
        for i, f in enumerate(fns):
            if f is None:
                continue
            t0 = time.perf_counter()
            f()
            sync()
            times[i].append(time.perf_counter() - t0)
    return [statistics.median(t) if t else None for t in times]


def _block_sides(device, T, D, H, dtype):
    import handblock
    from bench import torch_setup
    from tapeml.array import backend
    from tapeml.array.values import Record
    from tapeml.evaluator.interpreter import Interpreter
    from tapeml.faces.cli import tune_runtime
    tune_runtime()      # what `tapeml script.ml` does (the heap keeps freed blocks); PyTorch's side runs under it too
    rng = np.random.default_rng(0)
    hidden = 4 * D
    W = handblock.make_weights(D, H, hidden, rng, dtype)
    x = rng.standard_normal((T, D)).astype(dtype)
    R = rng.standard_normal((T, D)).astype(dtype)
    be = backend.make(device)
    previous = backend.current()
    backend.set_current(be)
    try:
        interp = Interpreter()
        interp.run(f'set_dtype("{np.dtype(dtype).name}")', "<bench>")
        f = handblock.to_record_fields(W)
        heads = tuple(Record({k: be.asarray(v) for k, v in h.items()}) for h in f.pop("heads"))
        fields = {k: be.asarray(v) for k, v in f.items()}
        interp.globals.vars.update(w=Record({"heads": heads, **fields}), x=be.asarray(x), R=be.asarray(R))
        interp.run(textwrap.dedent("""
            loss = fn(w) -> sum(transformer_block(x, w) * R)
            fn step() -> value_and_grad(loss, w)
        """), "<bench>")
        g = interp.globals.vars
        tapeml_step = lambda: interp.call(g["step"], [], {}, None)      # noqa: E731
        # the same weights in PyTorch eager, moved to the device
        tstep, _ = torch_setup(W, x, R, hidden, device.partition(":")[2] or "cpu")
        layer_step = lambda: tstep().item()       # noqa: E731 - the loss read back: a sync on a GPU
        value, grads = tapeml_step()
        ref = layer_step()
        err = abs(float(value) - float(ref)) / max(1.0, abs(float(ref)))
        assert err < (1e-9 if dtype == np.float64 else 2e-3), f"tapeml and PyTorch losses differ ({err:.2e})"
    finally:
        backend.set_current(previous)

    def run_tapeml():
        backend.set_current(be)
        try:
            return tapeml_step()
        finally:
            backend.set_current(previous)
    return run_tapeml, layer_step


def _within(be, fn):
    """fn, run with `be` as the process default session's backend (what it makes is made there)."""
    from tapeml.array import backend

    def run():
        previous = backend.current()
        backend.set_current(be)
        try:
            return fn()
        finally:
            backend.set_current(previous)
    return run


def minigpt_steps(device, repeat):
    """Seconds per minigpt training step (bench.MINIGPT_STEP) on `device` and on NumPy."""
    from bench import MINIGPT_STEP, ml_bench
    from tapeml.array import backend
    from tapeml.faces.cli import tune_runtime
    tune_runtime()
    be = backend.make(device)
    ours = _within(be, lambda: ml_bench(MINIGPT_STEP))()
    on_device = _within(be, ours)
    cpu = ml_bench(MINIGPT_STEP)
    return _timed([on_device, cpu], repeat, be.synchronize)


def device_rows(device, quick=False):
    """(title, rows) of the device table: rows are (case, tapeml seconds, PyTorch seconds)."""
    from tapeml.array import backend
    be = backend.make(device)
    rows = []
    sizes = [(128, 512, 8)] + ([] if quick else [(512, 512, 8)])
    for T, D, H in sizes:
        ours, theirs = _block_sides(device, T, D, H, np.float32)
        repeat = 5 if quick else (11 if T >= 512 else 21)
        t_ours, t_theirs = _timed([ours, theirs], repeat, be.synchronize)
        rows.append((f"block fwd+bwd T={T}, D={D}, {H} heads, float32", t_ours, t_theirs))
    return rows


def write_minigpt(out, device, quick=False):
    t_dev, t_np = minigpt_steps(device, 5 if quick else 15)
    out(f"## minigpt training steps per second (float64, 2 blocks, d_model 64, batch 16 x 64)")
    out()
    out(f"| backend | seconds per step | steps per second |")
    out("| --- | --- | --- |")
    out(f"| {device} | {t_dev * 1e3:.1f} ms | {1 / t_dev:.1f} |")
    out(f"| numpy (this CPU) | {t_np * 1e3:.1f} ms | {1 / t_np:.1f} |")
    out()


def write_rows(out, device, rows):
    out(f"## tapeml on {device} against PyTorch eager on {device}")
    out()
    out("| case | tapeml | PyTorch eager | tapeml / PyTorch |")
    out("| --- | --- | --- | --- |")
    for name, a, b in rows:
        out(f"| {name} | {a * 1e3:.2f} ms | {b * 1e3:.2f} ms | {a / b:.2f}x |")
    out()
