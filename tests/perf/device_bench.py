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
Each side is timed in rounds round-robin (one call of each side per round); a cell gives the
median, then the fastest and the slowest round (the spread). On a GPU every call ends with a
synchronisation (the loss read back as a number). Every tapeml side runs in a Session of its own
(bench.row_session: its float type and device are its own, never an earlier row's), and each row
says its settings and the machine's load when its timing ended (bench.load_now).
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
    return [t or None for t in times]


def _block_sides(device, T, D, H, dtype):
    import handblock
    from bench import row_session, session_call, settings, torch_setup
    from tapeml.array import backend
    from tapeml.array.values import Record
    from tapeml.evaluator.stack import running
    from tapeml.faces.cli import tune_runtime
    tune_runtime()      # what `tapeml script.ml` does (the heap keeps freed blocks); PyTorch's side runs under it too
    rng = np.random.default_rng(0)
    hidden = 4 * D
    W = handblock.make_weights(D, H, hidden, rng, dtype)
    x = rng.standard_normal((T, D)).astype(dtype)
    R = rng.standard_normal((T, D)).astype(dtype)
    s = row_session(np.dtype(dtype).name, device)
    with running(s.state):
        be = backend.current()
        f = handblock.to_record_fields(W)
        heads = tuple(Record({k: be.asarray(v) for k, v in h.items()}) for h in f.pop("heads"))
        fields = {k: be.asarray(v) for k, v in f.items()}
        for name, v in dict(w=Record({"heads": heads, **fields}), x=be.asarray(x), R=be.asarray(R)).items():
            s.interp.set_variable(name, v)
    s.run(textwrap.dedent("""
        loss = fn(w) -> sum(transformer_block(x, w) * R)
        fn step() -> value_and_grad(loss, w)
    """), "<bench>")
    tapeml_step = session_call(s, "step")
    # the same weights in PyTorch eager, moved to the device
    tstep, _ = torch_setup(W, x, R, hidden, device.partition(":")[2] or "cpu")
    layer_step = lambda: tstep().item()       # noqa: E731 - the loss read back: a sync on a GPU
    value, grads = tapeml_step()
    ref = layer_step()
    err = abs(float(value) - float(ref)) / max(1.0, abs(float(ref)))
    assert err < (1e-9 if dtype == np.float64 else 2e-3), f"tapeml and PyTorch losses differ ({err:.2e})"
    return tapeml_step, layer_step, settings(s)


def minigpt_steps(device, repeat):
    """Seconds per minigpt training step (bench.MINIGPT_STEP, float64) on `device` and on NumPy, each
    in a Session of its own: ([rounds on the device], [rounds on NumPy], (their settings))."""
    from bench import MINIGPT_STEP, ml_bench, settings
    from tapeml.array import backend
    from tapeml.faces.cli import tune_runtime
    tune_runtime()
    be = backend.make(device)
    on_device = ml_bench(MINIGPT_STEP, "float64", device)
    cpu = ml_bench(MINIGPT_STEP, "float64")
    t_dev, t_np = _timed([on_device, cpu], repeat, be.synchronize)
    return t_dev, t_np, (settings(on_device.session), settings(cpu.session))


def device_rows(device, quick=False):
    """(title, rows) of the device table: rows are (case, tapeml seconds, PyTorch seconds)."""
    from tapeml.array import backend
    be = backend.make(device)
    rows = []
    sizes = [(128, 512, 8)] + ([] if quick else [(512, 512, 8)])
    from bench import load_now
    for T, D, H in sizes:
        ours, theirs, cfg = _block_sides(device, T, D, H, np.float32)
        repeat = 5 if quick else (11 if T >= 512 else 21)
        t_ours, t_theirs = _timed([ours, theirs], repeat, be.synchronize)
        rows.append((f"block fwd+bwd T={T}, D={D}, {H} heads", cfg, t_ours, t_theirs, load_now()))
    return rows


def spread(ts) -> str:
    """The median of a side's rounds, then its fastest and slowest (wall time, ms)."""
    return f"{statistics.median(ts) * 1e3:.2f} ms ({min(ts) * 1e3:.2f} to {max(ts) * 1e3:.2f})"


def write_minigpt(out, device, quick=False):
    from bench import load_now
    t_dev, t_np, (cfg_dev, cfg_np) = minigpt_steps(device, 5 if quick else 15)
    load = load_now()
    out(f"## minigpt training steps per second (2 blocks, d_model 64, batch 16 x 64)")
    out()
    out(f"Wall time per step over {len(t_dev)} rounds, the two backends alternating: the median, with "
        "the fastest and the slowest round; steps per second from the median.")
    out()
    out(f"| backend | settings | seconds per step | steps per second | load |")
    out("| --- | --- | --- | --- | --- |")
    out(f"| {device} | {cfg_dev} | {spread(t_dev)} | {1 / statistics.median(t_dev):.1f} | {load} |")
    out(f"| numpy (this CPU) | {cfg_np} | {spread(t_np)} | {1 / statistics.median(t_np):.1f} | {load} |")
    out()


def write_rows(out, device, rows):
    out(f"## tapeml on {device} against PyTorch eager on {device}")
    out()
    out("Wall time per call, the sides alternating: the median, with the fastest and the slowest round; "
        "the ratio of the medians.")
    out()
    out("| case | settings | tapeml | PyTorch eager | tapeml / PyTorch | load |")
    out("| --- | --- | --- | --- | --- | --- |")
    for name, cfg, a, b, load in rows:
        out(f"| {name} | {cfg} | {spread(a)} | {spread(b)} | "
            f"{statistics.median(a) / statistics.median(b):.2f}x | {load} |")
    out()
