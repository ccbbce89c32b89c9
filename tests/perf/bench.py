"""tapeml benchmark suite: ratios against hand-written NumPy (the floor) and PyTorch eager.

    python tests/perf/bench.py [--quick] [--write docs/performance.md]

Every figure is the minimum of CPU time over alternating rounds (each round a batch of calls of one
side, the order reversed every other round), with each side's spread; ratios are ratios of minima.
Start-up and the REPL's first prompt are medians of wall time (whole processes). The language rows
compare with CPython and, when `octave-cli` or `octave` is on PATH, GNU Octave. The hand NumPy
block's gradients are checked against tapeml's before anything is timed, and the replayed tape's
(tests/perf/replay.py) against the step's.
"""
from __future__ import annotations

import argparse
import os
import sys as _sys

# Both sides run their BLAS (and PyTorch its intra-op pool) on one thread unless --threads says
# otherwise: on a shared 2-core machine spinning BLAS threads make timings meaningless, and one
# thread compares the libraries' own work. Must be set before NumPy is imported.
_threads = next((a.split("=", 1)[1] for a in _sys.argv if a.startswith("--threads=")), "1")
for _var in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ[_var] = _threads
import platform
import resource
import statistics
import subprocess
import sys
import textwrap
import time

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, HERE)
import handblock
from replay import check_replay, recorded_replay  # noqa: E402

import tapeml  # noqa: E402
from tapeml.evaluator import progress  # noqa: E402
from tapeml.evaluator.stack import running  # noqa: E402
from tapeml.array import diagnostics  # noqa: E402
from tapeml.array.values import Record  # noqa: E402

try:
    import torch
    torch.set_num_threads(int(_threads))
except ImportError:  # PyTorch is only a reference, never a dependency
    torch = None


def interleaved(fns, repeat, warmup=2):
    """The times of each function in `fns` (a list; None entries give None), timed round-robin:
    one call of each per round, so a change in the machine's load (this is a shared VM) falls on
    every side alike instead of on whichever ran during it."""
    live = [f for f in fns if f is not None]
    for _ in range(warmup):
        for f in live:
            f()
    times = [[] for _ in live]
    for _ in range(repeat):
        for f, ts in zip(live, times):
            t0 = time.perf_counter()
            f()
            ts.append(time.perf_counter() - t0)
    each = iter(times)
    return [None if f is None else next(each) for f in fns]


def row_session(dtype="float64", device=None):
    """A Session of its own for each row: its float type, device, generator and diagnostics are
    its own, so no row inherits what an earlier one set (a float32 row once turned every later row
    float32: issue 38)."""
    # the NumPy rows are NumPy's whatever TAPEML_DEVICE says (`--device` names the other device's rows)
    return tapeml.Session(dtype=dtype, device=device or "numpy", out=open(os.devnull, "w"))


def session_call(s, name, *args):
    """The function `name` of Session s as a Python callable with no conversion of its result:
    it runs in s's state, as s.call does, at the cost of entering it (a few µs)."""
    fn = s.interp.get_variable(name)

    def call():
        with running(s.state):
            return s.interp.call(fn, list(args), {}, None)
    call.session = s
    return call


def settings(s) -> str:
    """What a row ran under: its Session's float type and device, BLAS threads, compiled bodies
    or the walker, diagnostics."""
    from tapeml.array import threads
    with running(s.state):
        be, dt = s.state.values["backend"], np.dtype(s.state.values["dtype"]).name
        diag = "on" if diagnostics.current().active else "off"
    from tapeml.evaluator import compiler
    compiled = "compiled" if compiler.ENABLED and s.interp.compiled else "walked"
    return f"{dt}, {be.name}, BLAS on {threads.current() or _threads} thread(s), {compiled}, diagnostics {diag}"


def tapeml_setup(W, x, R, dtype="float64"):
    from tapeml.faces.cli import tune_runtime
    s = row_session(dtype)
    tune_runtime()          # what `tapeml script.ml` does; the hand NumPy runs under the same setting
    f = handblock.to_record_fields(W)
    heads = tuple(Record(h) for h in f.pop("heads"))
    with running(s.state):
        for name, v in dict(w=Record({"heads": heads, **f}), x=x, R=R).items():
            s.interp.set_variable(name, v)
    s.run(textwrap.dedent("""
        loss = fn(w) -> sum(transformer_block(x, w) * R)
        fn step() -> value_and_grad(loss, w)
        fn forward() -> transformer_block(x, w)
    """), "<bench>")
    step = session_call(s, "step")
    step.weights = s.interp.get_variable("w")       # the record grad differentiates (tests/perf/replay.py)
    return step, session_call(s, "forward")


def check_against_hand(step, W, x, R):
    value, g = step()
    out, G = handblock.block_fwd_bwd(x, W, R)
    H = W["H"]
    dk = W["Wq"].shape[1] // H
    pairs = [(g.fields["ln1_gamma"], G["g1"]), (g.fields["ln1_beta"], G["b1n"]), (g.fields["w1"], G["w1"]),
             (g.fields["b1"], G["b1"]), (g.fields["w2"], G["w2"]), (g.fields["b2"], G["b2"]),
             (g.fields["ln2_gamma"], G["g2"]), (g.fields["ln2_beta"], G["b2n"])]
    for h, head in enumerate(g.fields["heads"]):
        sl = slice(h * dk, (h + 1) * dk)
        pairs += [(head.fields["wq"], G["Wq"][:, sl]), (head.fields["wk"], G["Wk"][:, sl]),
                  (head.fields["wv"], G["Wv"][:, sl]), (head.fields["wo"], G["Wo"][sl, :])]
    tol = 1e-9 if x.dtype == np.float64 else 2e-3
    for a, b in pairs:
        err = np.max(np.abs(a - b)) / max(1e-12, np.max(np.abs(b)))
        assert err < tol, f"tapeml and hand NumPy gradients differ ({err:.2e})"
    assert abs(float(value) - float(np.sum(out * R))) < tol * max(1.0, abs(float(value)))


def torch_setup(W, x, R, hidden, device="cpu"):
    dt = torch.float64 if x.dtype == np.float64 else torch.float32
    D = x.shape[1]
    layer = torch.nn.TransformerEncoderLayer(D, W["H"], dim_feedforward=hidden, dropout=0.0,
                                             batch_first=True, dtype=dt)
    with torch.no_grad():
        layer.self_attn.in_proj_weight.copy_(torch.from_numpy(np.concatenate([W["Wq"], W["Wk"], W["Wv"]], 1).T))
        layer.self_attn.in_proj_bias.zero_()
        layer.self_attn.out_proj.weight.copy_(torch.from_numpy(W["Wo"].T))
        layer.self_attn.out_proj.bias.zero_()
        layer.linear1.weight.copy_(torch.from_numpy(W["w1"].T)); layer.linear1.bias.copy_(torch.from_numpy(W["b1"]))
        layer.linear2.weight.copy_(torch.from_numpy(W["w2"].T)); layer.linear2.bias.copy_(torch.from_numpy(W["b2"]))
        layer.norm1.weight.copy_(torch.from_numpy(W["g1"])); layer.norm1.bias.copy_(torch.from_numpy(W["b1n"]))
        layer.norm2.weight.copy_(torch.from_numpy(W["g2"])); layer.norm2.bias.copy_(torch.from_numpy(W["b2n"]))
    layer = layer.to(device)
    tx = torch.from_numpy(x)[None].to(device)
    tR = torch.from_numpy(R)[None].to(device)

    def step():
        layer.zero_grad(set_to_none=True)
        loss = (layer(tx) * tR).sum()
        loss.backward()
        return loss

    def forward():
        with torch.no_grad():
            return layer(tx)
    return step, forward


def block_rows(sizes, dtype, repeat_scale, replay_all=False):
    rows = []
    for (T, D, H) in sizes:
        rng = np.random.default_rng(0)
        hidden = 4 * D
        W = handblock.make_weights(D, H, hidden, rng, dtype)
        x = rng.standard_normal((T, D)).astype(dtype)
        R = rng.standard_normal((T, D)).astype(dtype)
        step, forward = tapeml_setup(W, x, R, np.dtype(dtype).name)
        cfg = settings(step.session)
        check_against_hand(step, W, x, R)
        # alternating rounds of CPU time, each a batch of calls of about 20 ms: 7 rounds at
        # 512x512 (~5 s), more below
        rounds = max(5, int(repeat_scale * (7 if T * D > 100_000 else 15)))
        tstep, tfwd = torch_setup(W, x, R, hidden) if torch is not None else (None, None)
        t_tml, t_hand, t_torch = cpu_sides([step, lambda: handblock.block_fwd_bwd(x, W, R), tstep], rounds)
        rows.append((f"fwd+bwd T={T}, D={D}, {H} heads", cfg, t_tml, t_hand, t_torch, load_now()))
        # where the fixed costs dominate (T=8), and in float64 at T=128 too: what a compiled step could reach
        if T * D <= 128 or (replay_all and T * D <= 128 * 256):
            replay, leaves = recorded_replay(step)
            check_replay(replay, leaves, step, step.weights)
            t_rep, t_hand2 = cpu_sides([replay, lambda: handblock.block_fwd_bwd(x, W, R)], rounds)
            rows.append((f"the same step's {len(leaves)}-leaf tape replayed: its recorded primitives' "
                         "forwards and VJPs only (no interpreter, checks or Box; a measure, not a "
                         "feature: tests/perf/replay.py)", cfg, t_rep, t_hand2, None, load_now()))
        if (T, D) == (128, 256):
            t_f, t_hf, t_tf = cpu_sides([forward, lambda: handblock.block_fwd(x, W), tfwd], rounds)
            rows.append((f"forward only T={T}, D={D}, {H} heads", cfg, t_f, t_hf, t_tf, load_now()))
    return rows


def cpu_sides(fns, rounds, batch=0.02):
    """Per-call CPU times of each function in `fns` (None entries give None) over `rounds`
    alternating rounds, each round a batch of calls of about `batch` seconds of one side: a
    list per side, whose minimum the tables give, with the spread."""
    live = [f for f in fns if f is not None]
    counts = []
    for f in live:
        f()
        counts.append(max(1, int(batch / max(cpu_time(f), 1e-6))))
    runs = [(lambda f=f, k=k: [f() for _ in range(k)]) for f, k in zip(live, counts)]
    per_call = iter([[t / k for t in ts] for ts, k in zip(cpu_rounds(runs, rounds), counts)])
    return [None if f is None else next(per_call) for f in fns]


MINIGPT_STEP = """
seed(0)
V = 66
d_model = 64
context = 64
batch = 16
blocks = (transformer_block_init(d_model, 4), transformer_block_init(d_model, 4))
params = {tok = 0.02 * randn(V, d_model), pos = 0.02 * randn(context, d_model), blocks = blocks,
          ln_gamma = ones(d_model), ln_beta = zeros(d_model)}
fn forward(params, ids)
  x = embedding(params.tok, ids) + params.pos
  for blk in params.blocks
    x = transformer_block(x, blk, norm_first = true, causal = true, dropout = 0.1, training = true)
  end
  return layer_norm(x, params.ln_gamma, params.ln_beta) @ params.tok'
end
x = randint(0, V, batch, context)
y = randint(0, V, batch, context)
state = adamw_init(params)
fn bench()
  loss, grads = value_and_grad(fn(p) -> cross_entropy(forward(p, x), y), params)
  grads = clip_grad_norm(grads, 1.0)
  params, state = adamw_step(params, grads, state, lr = 1e-3, weight_decay = 0.1)
  return loss
end
"""


def torch_minigpt_step():
    """The same model and step in PyTorch eager: pre-norm causal blocks, tied output, AdamW."""
    torch.manual_seed(0)
    V, D, T, B = 66, 64, 64, 16
    tok = torch.nn.Parameter(0.02 * torch.randn(V, D, dtype=torch.float64))
    pos = torch.nn.Parameter(0.02 * torch.randn(T, D, dtype=torch.float64))
    blocks = torch.nn.ModuleList([torch.nn.TransformerEncoderLayer(D, 4, 4 * D, dropout=0.1, batch_first=True,
                                                                   norm_first=True, dtype=torch.float64)
                                  for _ in range(2)])
    ln = torch.nn.LayerNorm(D, dtype=torch.float64)
    params = [tok, pos] + list(blocks.parameters()) + list(ln.parameters())
    opt = torch.optim.AdamW(params, lr=1e-3, weight_decay=0.1)
    x = torch.randint(0, V, (B, T))
    y = torch.randint(0, V, (B, T))
    mask = torch.nn.Transformer.generate_square_subsequent_mask(T, dtype=torch.float64)
    blocks.train()

    def step():
        h = tok[x] + pos
        for blk in blocks:
            h = blk(h, src_mask=mask, is_causal=True)
        logits = ln(h) @ tok.T
        return _torch_update(torch.nn.functional.cross_entropy(logits.reshape(-1, V), y.reshape(-1)), params, opt)
    return step


def _torch_update(loss, params, opt):
    """The step after the loss, as the .ml programs take it: backward, clip the gradients' norm
    at 1, the optimizer's step; returns the loss."""
    opt.zero_grad(set_to_none=True)
    loss.backward()
    torch.nn.utils.clip_grad_norm_(params, 1.0)
    opt.step()
    return loss


ENCDEC_STEP = """
seed(0)
L = 6
V = 10
d_model = 32
batch = 64
params = {src_tok = 0.5 * randn(V, d_model), src_pos = 0.5 * randn(L, d_model),
          tgt_tok = 0.5 * randn(V + 1, d_model), tgt_pos = 0.5 * randn(L, d_model),
          enc = transformer_block_init(d_model, 2), enc_gamma = ones(d_model), enc_beta = zeros(d_model),
          dec = transformer_decoder_block_init(d_model, 2), dec_gamma = ones(d_model), dec_beta = zeros(d_model),
          w_out = 0.1 * randn(d_model, V), b_out = zeros(V)}
fn loss_fn(p, src, dec_in, tgt)
  x = transformer_block(embedding(p.src_tok, src) + p.src_pos, p.enc, norm_first = true)
  memory = layer_norm(x, p.enc_gamma, p.enc_beta)
  y = transformer_decoder_block(embedding(p.tgt_tok, dec_in) + p.tgt_pos, memory, p.dec, norm_first = true)
  return cross_entropy(dense(layer_norm(y, p.dec_gamma, p.dec_beta), p.w_out, p.b_out), tgt)
end
src = randint(0, V, batch, L)
tgt = src[:, L - 1:-1:0]
dec_in = [10 * ones(batch, 1), tgt[:, 0:L - 2]]
state = adamw_init(params)
fn bench()
  loss, grads = value_and_grad(fn(p) -> loss_fn(p, src, dec_in, tgt), params)
  grads = clip_grad_norm(grads, 1.0)
  params, state = adamw_step(params, grads, state, lr = 3e-3, weight_decay = 0.01)
  return loss
end
"""


def torch_encdec_step():
    """examples/encoder_decoder.ml's step in PyTorch eager: a pre-norm encoder block and a pre-norm
    decoder block (causal self-attention, cross-attention to the encoder's normed output), d_model 32,
    2 heads, 6 positions, batch 64, float64, clip_grad_norm and AdamW."""
    torch.manual_seed(0)
    L, V, D, B = 6, 10, 32, 64
    f64 = torch.float64
    src_tok = torch.nn.Parameter(0.5 * torch.randn(V, D, dtype=f64))
    src_pos = torch.nn.Parameter(0.5 * torch.randn(L, D, dtype=f64))
    tgt_tok = torch.nn.Parameter(0.5 * torch.randn(V + 1, D, dtype=f64))
    tgt_pos = torch.nn.Parameter(0.5 * torch.randn(L, D, dtype=f64))
    enc = torch.nn.TransformerEncoderLayer(D, 2, 4 * D, dropout=0.0, batch_first=True, norm_first=True, dtype=f64)
    dec = torch.nn.TransformerDecoderLayer(D, 2, 4 * D, dropout=0.0, batch_first=True, norm_first=True, dtype=f64)
    enc_ln, dec_ln = torch.nn.LayerNorm(D, dtype=f64), torch.nn.LayerNorm(D, dtype=f64)
    out = torch.nn.Linear(D, V, dtype=f64)
    params = [src_tok, src_pos, tgt_tok, tgt_pos] + [p for m in (enc, dec, enc_ln, dec_ln, out) for p in m.parameters()]
    opt = torch.optim.AdamW(params, lr=3e-3, weight_decay=0.01)
    src = torch.randint(0, V, (B, L))
    tgt = src.flip(1)
    dec_in = torch.cat([torch.full((B, 1), V), tgt[:, :L - 1]], 1)
    mask = torch.nn.Transformer.generate_square_subsequent_mask(L, dtype=f64)

    def step():
        memory = enc_ln(enc(src_tok[src] + src_pos))
        y = dec(tgt_tok[dec_in] + tgt_pos, memory, tgt_mask=mask, tgt_is_causal=True)
        return _torch_update(torch.nn.functional.cross_entropy(out(dec_ln(y)).reshape(-1, V), tgt.reshape(-1)),
                             params, opt)
    return step


def ml_bench(code, dtype="float64", device=None):
    """The `bench` function of a .ml program run in a Session of its own, as a Python callable
    (its .session says what it ran under: `settings`)."""
    s = row_session(dtype, device)
    s.run(code, "<bench>")
    return session_call(s, "bench")


def python_loop(n):
    s = 0.0
    for i in range(1, n + 1):
        s = s + i
    return s


def fib(n):
    return n if n < 2 else fib(n - 1) + fib(n - 2)


OCTAVE_PROGRAM = """1;
function r = fib(n)
  if n < 2
    r = n;
  else
    r = fib(n - 1) + fib(n - 2);
  end
end
function s = loop(n)
  s = 0;
  for i = 1:n
    s = s + i;
  end
end
fib(12); loop(1000);
t = cputime; fib(%(fib)d); printf("fib %%.9g\\n", cputime - t);
t = cputime; loop(%(loop)d); printf("loop %%.9g\\n", cputime - t);
"""


def octave_command():
    """GNU Octave's command-line interpreter when one is on PATH (octave-cli, else octave), or None."""
    import shutil
    found = shutil.which("octave-cli") or shutil.which("octave")
    return [found, "--no-gui", "--norc", "--quiet", "--no-window-system"] if found else None


def octave_times(cmd, path, n_fib, n_loop):
    """CPU seconds of fib(n_fib) and of the scalar loop in one fresh Octave process (its `cputime`)."""
    with open(path, "w", encoding="utf-8") as f:
        f.write(OCTAVE_PROGRAM % {"fib": n_fib, "loop": n_loop})
    out = subprocess.run(cmd + [path], check=True, capture_output=True, text=True).stdout
    times = dict(line.split() for line in out.splitlines() if line.split()[:1] in (["fib"], ["loop"]))
    return float(times["fib"]), float(times["loop"])


def cpu_rounds(fns, rounds, warmup=1):
    """CPU time of each function in `fns`, one call each per round, the order reversed every other
    round: a list of times per function."""
    for _ in range(warmup):
        for f in fns:
            f()
    times = [[] for _ in fns]
    order = list(range(len(fns)))
    for r in range(rounds):
        for i in (order if r % 2 == 0 else order[::-1]):
            times[i].append(cpu_time(fns[i]))
    return times


def cpu_cell(ts):
    """A side's rounds: the minimum, then the median and the maximum (the spread)."""
    if not ts:
        return "—"
    return f"{fmt(min(ts))} (median {fmt(statistics.median(ts))}, max {fmt(max(ts))})"


def load_now() -> str:
    """The machine's load when a row's timing ended: the 1-minute load average (os.getloadavg,
    which covers the row's last minute) against the CPU count."""
    return f"{os.getloadavg()[0]:.1f} / {os.cpu_count()} CPUs"


def cpu_time(fn):
    t0 = time.process_time()
    fn()
    return time.process_time() - t0


def language_rows(out, quick):
    """The interpreter against CPython (always) and GNU Octave (when on PATH) on two programs
    users write: a scalar loop and a recursive fib. CPU time, the minimum over alternating rounds
    (one run of each side per round, the order reversed every other round; Octave in a fresh
    process each round), with each side's spread (its slowest round over its fastest, less one)."""
    import tempfile
    rounds = 4 if quick else 15     # a shared VM's noise needs many rounds for a fair minimum
    n = 1_000_000 if not quick else 200_000
    fib_src = "fn fib(n)\n  if n < 2\n    return n\n  end\n  return fib(n - 1) + fib(n - 2)\nend\n"
    walked = ml_bench(fib_src + "fn bench() -> fib(20)")
    walked.session.interp.compiled = False      # every body on the tree walker (TAPEML_COMPILE=0's path)
    cases = [(f"`s = s + i`, {n:,} iterations", "loop",
              ml_bench(f"fn bench()\n  s = 0\n  for i in 1:{n}\n    s = s + i\n  end\n  return s\nend"),
              lambda: python_loop(n)),
             ("recursive fib(20)", "fib", ml_bench(fib_src + "fn bench() -> fib(20)"), lambda: fib(20)),
             ("recursive fib(22)", None, ml_bench(fib_src + "fn bench() -> fib(22)"), lambda: fib(22)),
             ("recursive fib(20), walked (no body compiled: the tree walker, as under TAPEML_COMPILE=0)", None,
              walked, lambda: fib(20))]
    octave = octave_command()
    times = {(c[0], side): [] for c in cases for side in ("tapeml", "CPython", "Octave")}
    with tempfile.TemporaryDirectory() as tmp:
        script = os.path.join(tmp, "bench_octave.m")
        for _, _, a, b in cases:      # warm-up
            a(), b()
        for r in range(rounds):
            jobs = [(c[0], "tapeml", c[2]) for c in cases] + [(c[0], "CPython", c[3]) for c in cases]
            if octave is not None:
                jobs.append((None, "Octave", None))
            for label, side, fn in (jobs if r % 2 == 0 else jobs[::-1]):
                if side == "Octave":
                    t_fib, t_loop = octave_times(octave, script, 20, n)
                    for c in cases:
                        if c[1] is not None:
                            times[(c[0], "Octave")].append(t_fib if c[1] == "fib" else t_loop)
                else:
                    times[(label, side)].append(cpu_time(fn))
    out()
    out("## The language against CPython and GNU Octave")
    out()
    out(f"CPU time (`time.process_time`, Octave's `cputime`), the minimum of {rounds} alternating rounds, "
        "with the median and the slowest round in brackets; ratios of the minima (and of the medians). "
        "The last row is the first fib's program with no body compiled: compiled over walked is the "
        "fib(20) row against it. "
        + ("GNU Octave: " + subprocess.run(octave + ["--version"], capture_output=True, text=True).stdout.splitlines()[0]
           if octave is not None else "GNU Octave: not on PATH, its column is skipped") + ".")
    out()
    load = load_now()
    out("| program | settings | tapeml | CPython | tapeml / CPython | GNU Octave | tapeml / Octave | load |")
    out("| --- | --- | --- | --- | --- | --- | --- | --- |")

    cell = cpu_cell
    for label, kind, bench_fn, _ in cases:
        t, p, o = times[(label, "tapeml")], times[(label, "CPython")], times[(label, "Octave")]
        out(f"| {label} | {settings(bench_fn.session)} | {cell(t)} | {cell(p)} | {min_ratio(t, p)} | "
            f"{cell(o) if o else ('—' if octave is not None else 'not on PATH')} | "
            f"{min_ratio(t, o) if o else '—'} | {load} |")
    fib20, fib20_walked = times[(cases[1][0], "tapeml")], times[(cases[3][0], "tapeml")]
    out()
    out(f"Compiled against walked, fib(20): {min_ratio(fib20_walked, fib20)} faster compiled "
        f"(walked {cell(fib20_walked)}, compiled {cell(fib20)}), in the same rounds.")
    fib22_calls = 2 * 28657 - 1         # fib(n) makes 2 fib(n + 1) - 1 calls
    return {"iteration": (min(times[(cases[0][0], "tapeml")]) / n, min(times[(cases[0][0], "CPython")]) / n),
            "call": (min(times[(cases[2][0], "tapeml")]) / fib22_calls,
                     min(times[(cases[2][0], "CPython")]) / fib22_calls)}


def cost_rows(out, quick, lang, ops):
    """What costs what in the language: one loop iteration, one user function call, one builtin
    call, one operator on a 2x2 matrix without and with recording, from the measurements above
    and a builtin-call loop measured here (the loop with the call minus the loop without it)."""
    n = 20000 if not quick else 5000
    loop = lambda body: ml_bench(f"x = [1, 2; 3, 4]\nfn bench()\n  y = 0\n  for i in 1:{n}\n    y = {body}\n"
                                 f"  end\n  return y\nend")      # noqa: E731
    with_sum_bench = loop("sum(x)")
    with_sum, with_kw, bare = cpu_rounds([with_sum_bench, loop("sum(x, dim = 1)"), loop("x")], 12 if not quick else 3)
    a = np.array([[1.0, 2.0], [3.0, 4.0]])
    np_mul = min(cpu_rounds([lambda: [a * 1.0001 for _ in range(n)]], 12 if not quick else 3)[0]) / n
    np_sum = min(cpu_rounds([lambda: [a.sum() for _ in range(n)]], 12 if not quick else 3)[0]) / n
    out()
    out("## What costs what in the language")
    out()
    out("Derived from the rows above (CPU-time minima) and a loop of builtin calls measured in the same run "
        "(the loop with the call minus the same loop without it). A program's time is roughly the sum of "
        "these over what it does, plus its matrices' own arithmetic (NumPy's, the last column). "
        f"Settings: {settings(with_sum_bench.session)}; load at the end: {load_now()}.")
    out()
    out("| one ... | costs | reference |")
    out("| --- | --- | --- |")
    it, it_py = lang["iteration"]
    call, call_py = lang["call"]
    out(f"| loop iteration of `s = s + i` (numbers) | {fmt(it)} | CPython {fmt(it_py)} |")
    out(f"| call of a user function (recursive fib: the call, `if`, `-`, `+`, `return`) | {fmt(call)} | "
        f"CPython {fmt(call_py)} |")
    out(f"| builtin call `sum(x)` of a 2x2 matrix | {fmt((min(with_sum) - min(bare)) / n)} | "
        f"NumPy's `a.sum()` {fmt(np_sum)} |")
    out(f"| builtin call with a keyword, `sum(x, dim = 1)` | {fmt((min(with_kw) - min(bare)) / n)} | |")
    mul_plain, mul_share = ops
    out(f"| operator `y * 1.0001` on a 2x2 matrix, not recorded (loop included) | {fmt(mul_plain)} | "
        f"NumPy's `a * 1.0001` {fmt(np_mul)} |")
    out(f"| the same operator recorded on the tape, its backward step included: the tape's share | "
        f"+{fmt(mul_share)} | |")


def startup(cmds, repeat=9):
    """Wall times of fresh processes, one of each command per round; bytecode caching on, as
    in a normal install (the warm-up round writes the .pyc files)."""
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    return interleaved([lambda c=c: subprocess.run(c, check=True, capture_output=True, env=env) for c in cmds],
                       repeat, warmup=2)


def repl_first_prompt(repeat=7):
    """Wall times from starting `tapeml` in a pseudo-terminal to its first prompt (the first run,
    which writes the bytecode caches, left out)."""
    import pty
    import select
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    env["TAPEML_HISTORY"] = os.path.join(HERE, ".bench_history")
    tml = os.path.join(os.path.dirname(sys.executable), "tapeml")
    times = []
    for _ in range(repeat + 1):
        t0 = time.perf_counter()
        pid, fd = pty.fork()
        if pid == 0:
            os.execve(tml, [tml], env)
        buf = b""
        while b"ml>" not in buf:
            ready, _, _ = select.select([fd], [], [], 10)
            if not ready:
                break
            try:
                buf += os.read(fd, 4096)
            except OSError:
                break
        times.append(time.perf_counter() - t0)
        os.write(fd, b"\x04")
        os.waitpid(pid, 0)
        os.close(fd)
    try:
        os.unlink(env["TAPEML_HISTORY"])
    except OSError:
        pass
    return times[1:]      # the first run writes the bytecode caches


def peak_rss(code):
    out = subprocess.run([sys.executable, "-c", code + "\nimport resource;print(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss)"],
                         check=True, capture_output=True, text=True)
    return int(out.stdout.strip().splitlines()[-1])


def fmt(t):
    if t is None:
        return "—"
    return f"{t * 1e3:.3g} ms" if t >= 1e-3 else f"{t * 1e6:.3g} µs" if t >= 1e-6 else f"{t * 1e9:.3g} ns"


def ratio(a, b):
    return "—" if (a is None or b is None) else f"{a / b:.2f}x"


def min_ratio(a, b):
    """The ratio of two sides' minima (lists of rounds), and of their medians."""
    if not a or not b:
        return "—"
    return f"{ratio(min(a), min(b))} (medians {ratio(statistics.median(a), statistics.median(b))})"


def device_main(args):
    """`--device`: the backends' table (issue 27) alone."""
    import device_bench
    lines = []

    def out(s=""):
        print(s, flush=True)
        lines.append(s)
    out(f"# tapeml on {args.device}")
    out()
    out(f"- machine: {platform.machine()}, {os.cpu_count()} cores; Python {platform.python_version()}, "
        f"NumPy {np.__version__}, PyTorch {torch.__version__ if torch else 'not installed'}"
        + (f", GPU {torch.cuda.get_device_name()}" if torch is not None and args.device.startswith("torch:cuda") else ""))
    out(f"- threads: BLAS and PyTorch on {_threads} thread(s)")
    out(f"- load when the run started: {load_now()}")
    out()
    tables = len(lines)
    device_bench.write_rows(out, args.device, device_bench.device_rows(args.device, args.quick))
    device_bench.write_minigpt(out, args.device, args.quick)
    out(f"Load when the run ended: {load_now()}.")
    if args.write:
        with open(args.write, "w", encoding="utf-8") as f:
            f.write("\n".join(lines) + "\n")
    if args.section:
        write_section(args.section, [("#" + x if x.startswith("## ") else x) for x in lines[tables:]],
                      f"python tests/perf/bench.py --device {args.device} --section {args.section}")
    return 0


SECTION = ("<!-- generated by `{command}`: edit the bench, not this part -->", "<!-- end of the generated part -->")


def write_section(path, lines, command):
    """Put `lines` between the markers of SECTION in the page at `path` (docs/backends.md's
    measured tables), the rest of the page as it is."""
    with open(path, encoding="utf-8") as f:
        text = f.read()
    begin = text.find("<!-- generated by `")
    end = text.find(SECTION[1])
    if begin < 0 or end < begin:
        raise SystemExit(f"bench: {path} has no generated part (the markers {SECTION[0].format(command='...')!r} "
                         f"and {SECTION[1]!r})")
    new = text[:begin] + SECTION[0].format(command=command) + "\n\n" + "\n".join(lines).strip("\n") + "\n\n" + text[end:]
    with open(path, "w", encoding="utf-8") as f:
        f.write(new)


PARTS = ("block", "tape", "steps", "startup", "memory", "language")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--quick", action="store_true", help="smaller sizes and fewer repeats")
    ap.add_argument("--write", help="write the markdown table to this file")
    ap.add_argument("--threads", default="1", help="BLAS / PyTorch threads for both sides (default 1); "
                    "give it as --threads=N")
    ap.add_argument("--device", help="measure tapeml on this PyTorch device (torch:cpu, torch:cuda) against "
                    "PyTorch eager on the same device, and minigpt steps per second there (tests/perf/device_bench.py)")
    ap.add_argument("--section", help="with --device: put the tables into this page between its markers "
                    "(docs/backends.md)")
    ap.add_argument("--only", help="comma-separated parts to run (" + ", ".join(PARTS) + "; default all): "
                    "a check of the generator, not a page to publish")
    args = ap.parse_args()
    if args.device and args.device != "numpy":
        return device_main(args)
    only = set(PARTS if not args.only else args.only.split(","))
    if only - set(PARTS):
        ap.error(f"--only: unknown part(s) {', '.join(sorted(only - set(PARTS)))}; the parts are {', '.join(PARTS)}")
    scale = 0.3 if args.quick else 1.0
    sizes = [(8, 16, 2), (128, 256, 8)] + ([] if args.quick else [(512, 512, 8)])
    lines = []
    stages = (2 * len(sizes) * ("block" in only) + ("tape" in only) + 2 * ("steps" in only)
              + 2 * ("startup" in only) + (not args.quick and "memory" in only)
              + ("language" in only) * (1 + ("tape" in only)) + 1)
    # progress on standard error (a live bar in a terminal, log lines otherwise); the table on stdout
    bar = progress.Bar(stages, "bench", progress.stream_for())

    def out(s=""):
        bar.write(sys.stdout, s + "\n")
        lines.append(s)

    def stage(note):
        """Count the stage that ran, show the one starting."""
        if stage.started:
            bar.update()
        stage.started = True
        bar.note(note)
    stage.started = False

    out("# tapeml performance")
    out()
    out("Generated by `python tests/perf/bench.py --write docs/performance.md`; all measured in the same "
        "run, the sides of each row timed in alternating rounds (one batch of each per round, the order "
        "reversed every other round), so a change in the machine's load falls on all of them. Each cell "
        "is the minimum of the rounds' CPU time per call (`time.process_time`), with the median and the "
        "slowest round in brackets (the spread); ratios are ratios of those minima (and, in brackets, of "
        "the medians), and below 1 mean tapeml is faster. Start-up and the REPL's first prompt are wall "
        "times of whole processes. Every tapeml row runs in a Session of its own (`settings`: its float "
        "type, device, BLAS threads, compiled or walked, diagnostics), so no row inherits another's "
        "settings; `load` is the machine's 1-minute load average (`os.getloadavg`) when the row's timing "
        "ended, against its CPU count: above the count, the sides waited for a core.")
    out()
    out(f"- machine: {platform.machine()}, {os.cpu_count()} cores, {platform.system()} {platform.release()}")
    out(f"- Python {platform.python_version()}, NumPy {np.__version__}"
        + (f", PyTorch {torch.__version__}" if torch else ", PyTorch not installed"))
    out(f"- MALLOC settings: tapeml sets M_MMAP_THRESHOLD/M_TRIM_THRESHOLD at start-up; "
        f"both sides run in this one process under the same setting")
    out(f"- threads: BLAS and PyTorch on {_threads} thread(s) for every side (`--threads=N` to change)")
    out(f"- load when the run started: {load_now()} (1-, 5- and 15-minute averages "
        f"{', '.join(f'{x:.1f}' for x in os.getloadavg())})")
    if args.only or args.quick:
        out(f"- a partial run (--only {args.only or 'all'}{', --quick' if args.quick else ''}): "
            "a check of the generator, not the published figures")
    out()
    if "block" in only:
        for dtype in ("float64", "float32"):
            try:
                rows = []
                for size in sizes:
                    stage(f"block {dtype} T={size[0]} D={size[1]}")
                    rows += block_rows([size], np.float32 if dtype == "float32" else np.float64, scale,
                                       replay_all=dtype == "float64")
            except Exception as e:  # float32 mode may be missing
                out(f"({dtype}: not measured: {e})")
                continue
            out(f"## Post-norm transformer block, {dtype}, value_and_grad from a .ml script")
            out()
            out("| case | settings | tapeml | hand NumPy | PyTorch eager | tapeml / NumPy | tapeml / PyTorch | load |")
            out("| --- | --- | --- | --- | --- | --- | --- | --- |")
            for name, cfg, a, b, c, load in rows:
                out(f"| {name} | {cfg} | {cpu_cell(a)} | {cpu_cell(b)} | {cpu_cell(c)} | {min_ratio(a, b)} | "
                    f"{min_ratio(a, c)} | {load} |")
            out()

    if only & {"tape", "steps", "startup", "memory"}:
        out("## Interpreter and tape overheads")
        out()
        out("| case | settings | tapeml | reference | ratio | load |")
        out("| --- | --- | --- | --- | --- | --- |")
    n_ops = 10000 if not args.quick else 2000

    def loop(op, recorded, ignored=False):
        return ml_bench(f"""
x = [1, 2; 3, 4]
fn f(x)
  y = {"[1, 2; 3, 4]" if ignored else "x"}
  for i in 1:{n_ops}
    y = y {op} 1.0001
  end
  return sum({"x" if ignored else "y"})
end
fn bench() -> {"grad(f, x)" if recorded else "f(x)"}
""")
    mul_plain = mul_rec = None
    if "tape" in only:
        stage("tape loop")
        torch_ops = None
        if torch is not None:
            def torch_ops():
                x = torch.tensor([[1.0, 2], [3, 4]], dtype=torch.float64, requires_grad=True)
                y = x
                for _ in range(n_ops):
                    y = y * 1.0001
                y.sum().backward()
        sides = [loop("*", True), loop("*", False), loop("+", True), loop("+", False), loop("*", True, True)]
        cfg = settings(sides[0].session)
        if torch_ops is not None:
            sides.append(torch_ops)
        ts = [[t / n_ops for t in col] for col in cpu_rounds(sides, 12 if not args.quick else 4)]
        load = load_now()
        mul_rec, mul_plain, add_rec, add_plain, ignored = ts[:5]
        ref = ts[5] if torch_ops is not None else None

        def share(rec, plain):
            per_round = [a - b for a, b in zip(rec, plain)]
            return min(rec) - min(plain), per_round
        out(f"| tape: one 2x2 `*` forward + backward (.ml loop; CPU time, {len(mul_rec)} alternating rounds) | "
            f"{cfg} | {cpu_cell(mul_rec)} | PyTorch float64 {cpu_cell(ref)} | {min_ratio(mul_rec, ref)} | {load} |")
        out(f"| the same loop without grad (nothing recorded) | {cfg} | {cpu_cell(mul_plain)} | | | {load} |")
        for sym, rec, plain in (("*", mul_rec, mul_plain), ("+", add_rec, add_plain)):
            d, per_round = share(rec, plain)
            out(f"| the tape's share of one recorded 2x2 `{sym}`: recorded minus not recorded (per-round "
                f"differences {fmt(min(per_round))} to {fmt(max(per_round))}) | {cfg} | {fmt(d)} | target 1.5 µs | "
                f"{d / 1.5e-6:.2f}x | {load} |")
        out(f"| the loop on untracked values inside a grad that ignores them | {cfg} | {cpu_cell(ignored)} | "
            f"without grad {cpu_cell(mul_plain)} | {min_ratio(ignored, mul_plain)} | {load} |")

    def step_row(what, code, reference, rounds, batch):
        """A training step of a .ml program against the same step in PyTorch eager (float64)."""
        ours = ml_bench(code)
        t, ref = cpu_sides([ours, reference() if torch is not None else None],
                           rounds if not args.quick else 4, batch)
        out(f"| one {what}; CPU time, {len(t)} alternating rounds) | {settings(ours.session)} | {cpu_cell(t)} | "
            f"PyTorch eager float64 {cpu_cell(ref)} | {min_ratio(t, ref)} | {load_now()} |")
    if "steps" in only:
        stage("minigpt step")
        step_row("minigpt training step (2 pre-norm causal blocks, d_model 64, batch 16x64, AdamW", MINIGPT_STEP,
                 torch_minigpt_step, 7, 0.1)
        stage("encoder-decoder step")
        step_row("`examples/encoder_decoder.ml` training step (a pre-norm encoder and decoder block, d_model 32, "
                 "batch 64x6, AdamW", ENCDEC_STEP, torch_encdec_step, 15, 0.05)
    process = "float64 (the default), numpy, a fresh process"
    if "startup" in only:
        stage("start-up")
        tml = os.path.join(os.path.dirname(sys.executable), "tapeml")
        t_start, t_np = startup([[tml, "-c", "1"], [sys.executable, "-c", "import numpy"]])
        out(f"| start-up `tapeml -c \"1\"` (wall time, {len(t_start)} alternating rounds) | {process} | "
            f"{cpu_cell(t_start)} | `python -c \"import numpy\"` {cpu_cell(t_np)} | {min_ratio(t_start, t_np)} | "
            f"{load_now()} |")
        stage("REPL first prompt")
        t_repl = repl_first_prompt()
        out(f"| the REPL's first prompt (`tapeml` in a pseudo-terminal; wall time, {len(t_repl)} runs) | {process} | "
            f"{cpu_cell(t_repl)} | target 400 ms | {min(t_repl) / 0.4:.2f}x (median "
            f"{statistics.median(t_repl) / 0.4:.2f}x) | {load_now()} |")
    if not args.quick and "memory" in only:
        stage("peak memory")
        setup = (f"import sys; sys.path.insert(0, {HERE!r}); import numpy as np, handblock; "
                 "from tapeml.faces.cli import tune_runtime; tune_runtime(); "
                 "rng = np.random.default_rng(0); W = handblock.make_weights(512, 8, 2048, rng); "
                 "x = rng.standard_normal((512, 512)); R = rng.standard_normal((512, 512))\n")
        hand_rss = peak_rss(setup + "for _ in range(3): handblock.block_fwd_bwd(x, W, R)")
        tml_rss = peak_rss(setup + f"sys.argv=['bench']; import bench\n"
                                   "step, _ = bench.tapeml_setup(W, x, R)\nfor _ in range(3): step()")
        out(f"| peak resident memory, T=512 D=512 fwd+bwd (one run each) | {process} | {tml_rss / 1024:.0f} MB | "
            f"hand NumPy {hand_rss / 1024:.0f} MB | {tml_rss / hand_rss:.2f}x | {load_now()} |")
    if "language" in only:
        stage("the language against CPython and Octave")
        lang = language_rows(out, args.quick)
        if mul_plain is not None:
            stage("what costs what")
            cost_rows(out, args.quick, lang, (min(mul_plain), min(mul_rec) - min(mul_plain)))
    stage("done")
    bar.close()
    out()
    out(f"- load when the run ended: {load_now()} (1-, 5- and 15-minute averages "
        f"{', '.join(f'{x:.1f}' for x in os.getloadavg())})")
    if args.write:
        with open(args.write, "w", encoding="utf-8") as f:
            f.write("\n".join(lines).rstrip("\n") + "\n")


if __name__ == "__main__":
    main()
