"""The bench's generator (tests/perf/bench.py, device_bench.py, replay.py), checked without timing
anything long: each row runs in a Session of its own (a float32 row once turned every later row
float32, so docs/performance.md's minigpt step and docs/backends.md's minigpt table, labelled
float64, ran in float32); the replayed tape equals the step at T=128 (it crashed there: sum's
fast VJP declined and the replay had no fallback); each cell gives the spread and each row its
settings and the machine's load."""
import os
import re
import subprocess
import sys

import numpy as np
import pytest

from support import ROOT

PERF = os.path.join(ROOT, "tests", "perf")
sys.path.insert(0, PERF)

import bench  # noqa: E402
import handblock  # noqa: E402
from replay import check_replay, recorded_replay  # noqa: E402


def block(T, D, H, dtype=np.float64):
    rng = np.random.default_rng(0)
    W = handblock.make_weights(D, H, 4 * D, rng, dtype)
    x = rng.standard_normal((T, D)).astype(dtype)
    R = rng.standard_normal((T, D)).astype(dtype)
    return W, x, R


def test_a_float32_row_leaves_the_next_row_float64():
    W, x, R = block(8, 16, 2, np.float32)
    step32, _ = bench.tapeml_setup(W, x, R, "float32")
    value, grads = step32()
    assert grads.fields["w1"].dtype == np.float32
    assert bench.settings(step32.session).startswith("float32, numpy, ")
    nxt = bench.ml_bench("fn bench() -> [1, 2] / 3")
    assert nxt().dtype == np.float64
    assert bench.settings(nxt.session) .startswith("float64, numpy, BLAS on ")
    W64, x64, R64 = block(8, 16, 2)
    step64, _ = bench.tapeml_setup(W64, x64, R64)
    assert step64()[1].fields["w1"].dtype == np.float64
    bench.check_against_hand(step64, W64, x64, R64)        # hand NumPy's float64 gradients, to 1e-9
    # the float32 row's Session is still float32 after the others ran
    assert step32()[1].fields["w1"].dtype == np.float32


def test_the_minigpt_step_of_the_bench_runs_in_float64_after_a_float32_row():
    W, x, R = block(8, 16, 2, np.float32)
    bench.tapeml_setup(W, x, R, "float32")[0]()
    step = bench.ml_bench(bench.MINIGPT_STEP.replace("batch = 16", "batch = 2").replace("context = 64",
                                                                                       "context = 8"))
    loss = step()
    assert isinstance(loss, float) and np.isfinite(loss)
    with bench.running(step.session.state):
        params = step.session.interp.get_variable("params")
    assert params.fields["tok"].dtype == np.float64
    assert bench.settings(step.session).startswith("float64, numpy, BLAS on ")
    assert bench.settings(step.session).endswith(", compiled, diagnostics off")


@pytest.mark.parametrize("T, D, H", [(8, 16, 2), (128, 256, 8)])
def test_the_replayed_tape_equals_the_step(T, D, H):
    """At T=128 sum's plain VJP declines (returns None): the replay takes the tape's own choice
    (Primitive.pullback) and gives the step's value and every gradient exactly."""
    W, x, R = block(T, D, H)
    step, _ = bench.tapeml_setup(W, x, R)
    replay, leaves = recorded_replay(step)
    check_replay(replay, leaves, step, step.weights)
    value, cts = replay()
    ref_value, grads = step()
    assert float(value) == float(ref_value) and len(cts) == len(leaves) == 4 * H + 8


def test_cells_give_the_spread_and_ratios_the_medians_too():
    assert bench.cpu_cell([3e-3, 1e-3, 2e-3]) == "1 ms (median 2 ms, max 3 ms)"
    assert bench.min_ratio([2.0, 4.0, 3.0], [1.0, 2.0, 4.0]) == "2.00x (medians 1.50x)"
    assert bench.cpu_cell([]) == "—" and bench.min_ratio([], [1.0]) == "—"
    assert re.fullmatch(rf"\d+\.\d / {os.cpu_count()} CPUs", bench.load_now())


@pytest.mark.slow
def test_the_bench_prints_each_rows_settings_spread_and_load(tmp_path):
    """A quick partial run of the generator (the language rows only, 4 rounds): the page it writes."""
    out = tmp_path / "perf.md"
    r = subprocess.run([sys.executable, os.path.join(PERF, "bench.py"), "--quick", "--only", "language",
                        "--write", str(out)], capture_output=True, text=True, timeout=600,
                       env={**os.environ, "TAPEML_PROGRESS": "0"})
    assert r.returncode == 0, r.stderr[-3000:]
    page = out.read_text()
    assert re.search(rf"^- load when the run started: \d+\.\d / {os.cpu_count()} CPUs \(1-, 5- and 15-minute "
                     r"averages [\d.]+, [\d.]+, [\d.]+\)$", page, re.M)
    assert "- a partial run (--only language, --quick): a check of the generator, not the published figures" in page
    head = "| program | settings | tapeml | CPython | tapeml / CPython | GNU Octave | tapeml / Octave | load |"
    assert head in page
    rows = [line for line in page.split("\n") if line.startswith("| recursive fib(20)")]
    assert len(rows) == 2
    cell = r"[\d.]+ [mµn]?s \(median [\d.]+ [mµn]?s, max [\d.]+ [mµn]?s\)"
    for row in rows:
        assert re.fullmatch(rf"\| recursive fib\(20\)[^|]* \| float64, numpy, BLAS on 1 thread\(s\), "
                            rf"(compiled|walked), diagnostics off \| {cell} \| {cell} \| [\d.]+x \(medians [\d.]+x\) "
                            rf"\| [^|]+ \| [^|]+ \| \d+\.\d / {os.cpu_count()} CPUs \|", row), row
    assert ", walked, diagnostics off" in rows[1] and ", compiled, diagnostics off" in rows[0]
    assert re.search(r"^Compiled against walked, fib\(20\): [\d.]+x \(medians [\d.]+x\) faster compiled", page, re.M)
