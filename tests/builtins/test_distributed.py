"""Data-parallel training over torch.distributed (issue 27, item 5): world_size, rank, all_reduce,
broadcast and shard (builtins/distributed.py).

One process (no WORLD_SIZE): a world of 1, and torch never imported. Several: 2 processes on this
machine with gloo over the loopback address, started by torchrun (`-m tapeml`) or as plain
subprocesses with MASTER_ADDR, MASTER_PORT, RANK and WORLD_SIZE set; every subprocess has a
timeout (a hang fails the test, it is not a timing). The tests that start processes skip where
torch is not installed."""
from __future__ import annotations

import importlib.util
import os
import re
import socket
import subprocess
import sys
import time

import numpy as np
import pytest

from support import ROOT, TAPEML, error_of, output_of, value_of

HAS_TORCH = importlib.util.find_spec("torch") is not None
needs_torch = pytest.mark.skipif(not HAS_TORCH, reason="several processes need PyTorch (torch.distributed)")
LIMIT = 240          # seconds any launch may take before the test calls it a hang
DIST_ENV = ("WORLD_SIZE", "RANK", "LOCAL_RANK", "LOCAL_WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT",
            "GROUP_RANK", "ROLE_RANK", "TORCHELASTIC_RUN_ID", "TAPEML_DIST_TIMEOUT")


@pytest.fixture
def one_process(monkeypatch):
    for name in DIST_ENV:
        monkeypatch.delenv(name, raising=False)


# ---- one process ---------------------------------------------------------------------------------
def test_outside_torchrun_the_world_is_this_one_process(one_process, monkeypatch):
    setup = "t = {w = [1, 2; 3, 4], b = 0.5, more = ([1.5], {\"k\": 2})}"
    assert output_of("print(world_size(), rank())") == "1 0\n"
    for ws in (None, "1"):
        if ws is not None:
            monkeypatch.setenv("WORLD_SIZE", ws)
            monkeypatch.setenv("RANK", "0")
        assert value_of("world_size()") == 1.0 and value_of("rank()") == 0.0
        assert value_of("all_reduce(t) == t", setup) is True
        for op in ("mean", "sum", "max", "min"):
            assert output_of(f"{setup}\nprint(all_reduce(t, op=\"{op}\"))") == output_of(f"{setup}\nprint(t)")
        assert output_of(f"{setup}\nprint(broadcast(t))") == output_of(f"{setup}\nprint(t)")
        assert value_of("all_reduce(2.5)") == 2.5
        x = value_of("shard(reshape(1:12, 3, 4), dim=1)")
        assert np.array_equal(x, np.arange(1, 13).reshape(3, 4))
        assert output_of("loss, g = all_reduce((1.25, [1, 2]))\nprint(loss, g)") == "1.25 [1, 2]\n"


def test_shard_takes_this_ranks_equal_slice(one_process, monkeypatch):
    monkeypatch.setenv("WORLD_SIZE", "3")
    monkeypatch.setenv("RANK", "1")
    assert value_of("world_size()") == 3.0 and value_of("rank()") == 1.0
    x = np.arange(1, 19, dtype=float).reshape(6, 3)
    assert np.array_equal(value_of("shard(x)", x=x), x[2:4])
    assert np.array_equal(value_of("shard(x, dim=-1)", x=x.T), x.T[:, 2:4])
    assert np.array_equal(value_of("shard(1:9)"), np.array([4.0, 5, 6]))


def test_shards_gradient_puts_the_cotangent_back_in_place(one_process, monkeypatch):
    from fd import fd_grad
    monkeypatch.setenv("WORLD_SIZE", "2")
    monkeypatch.setenv("RANK", "1")
    x = np.random.default_rng(0).standard_normal((3, 4))
    g = value_of("grad(fn(x) -> sum(shard(x, dim=1)^3), x)", x=x)
    want = np.zeros_like(x)
    want[:, 2:] = 3 * x[:, 2:] ** 2
    np.testing.assert_allclose(g, want, rtol=0, atol=1e-15)
    np.testing.assert_allclose(g, fd_grad(lambda v: np.sum(v[:, 2:] ** 3), x, device=False), atol=1e-7)
    if HAS_TORCH:
        import torch
        t = torch.tensor(x, requires_grad=True)
        t.narrow(1, 2, 2).pow(3).sum().backward()
        np.testing.assert_allclose(g, t.grad.numpy(), rtol=1e-14, atol=1e-14)


def test_shard_says_which_sizes_do_not_divide(one_process, monkeypatch):
    monkeypatch.setenv("WORLD_SIZE", "4")
    monkeypatch.setenv("RANK", "2")
    e = error_of("\nx = zeros(10, 3)\ny = shard(x)")
    assert (e.kind, e.line, e.column) == ("ValueError", 3, 5)
    assert e.message == ("shard(): x (10x3) has 10 along dim 0, which does not split into 4 equal parts, one per "
                         "rank (10 = 4 x 2 + 2): make it a multiple of 4 (8 or 12)")
    e = error_of("\ny = shard(zeros(3, 2), dim=1)")
    assert (e.kind, e.line, e.column) == ("ValueError", 2, 5)
    assert "has 2 along dim 1, which does not split into 4 equal parts" in e.message
    assert e.message.endswith("make it a multiple of 4 (4)")
    e = error_of("\ny = shard(5)")
    assert (e.kind, e.line, e.column, e.message) == ("ShapeError", 2, 5,
                                                       "shard() needs a vector or matrix to split, got a number")
    e = error_of("\ny = shard([1, 2], dim=2)")
    assert (e.kind, e.line) == ("ValueError", 2) and "dim=2 is out of range" in e.message


def test_a_bad_environment_is_a_language_error(one_process, monkeypatch):
    monkeypatch.setenv("WORLD_SIZE", "two")
    e = error_of("\nn = world_size()")
    assert (e.kind, e.line, e.column) == ("ValueError", 2, 5)
    assert e.message == "the environment's WORLD_SIZE must be a whole number, got \"two\""
    monkeypatch.setenv("WORLD_SIZE", "2")
    e = error_of("\nr = rank()")
    assert e.message == ("WORLD_SIZE=2 is set but RANK is not: start the 2 processes with torchrun "
                         "--nproc-per-node 2 -m tapeml script.ml (it sets both)")
    monkeypatch.setenv("RANK", "2")
    assert error_of("shard([1, 2])").message == "the environment's RANK=2 is not a rank of a world of 2 (0 to 1)"
    monkeypatch.setenv("RANK", "0")
    monkeypatch.setenv("TAPEML_DIST_TIMEOUT", "soon")
    e = error_of("\ny = all_reduce(1)")
    assert (e.kind, e.line, e.column) == ("ValueError", 2, 5)
    if importlib.util.find_spec("torch") is None:        # the README's install: torch comes first
        assert e.message.startswith("all_reduce() across 2 processes needs PyTorch (torch.distributed)")
    else:
        assert e.message == "TAPEML_DIST_TIMEOUT must be a number of seconds > 0, got \"soon\""


def test_what_cannot_cross_is_named_by_its_path(one_process):
    e = error_of("\ny = all_reduce({w = [1, 2], b = (1, \"s\")})")
    assert (e.kind, e.line, e.column) == ("TypeError", 2, 5)
    assert e.message == ("all_reduce(): tree.b[1] is a string; only numbers and float matrices (in tuples, "
                         "records and dictionaries) cross between processes")
    e = error_of("\ny = broadcast(([1, 2] > 1, 1))")
    assert e.message.startswith("broadcast(): tree[0] is a bool vector of length 2;")
    e = error_of("\ng = grad(fn(p) -> all_reduce(sum(p^2)), [1, 2])")
    assert (e.kind, e.line, e.column) == ("TypeError", 2, 19)
    assert e.message.startswith("all_reduce(): tree is being differentiated (it depends on the input of grad)")
    e = error_of("\ny = all_reduce(1, op=\"avg\")")
    assert e.message == 'all_reduce(): op must be one of "mean", "sum", "max", "min", got "avg"'
    e = error_of("\ny = broadcast(1, src=1)")
    assert (e.kind, e.line, e.column) == ("ValueError", 2, 5)
    assert e.message == "broadcast(): src=1 is not a rank of this world of 1 process (ranks 0 to 0)"


def _python(code: str, env=None) -> subprocess.CompletedProcess:
    base = {k: v for k, v in os.environ.items() if k not in DIST_ENV and k != "TAPEML_DEVICE"}
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=LIMIT,
                          env={**base, **(env or {})}, cwd=ROOT)


def test_import_and_a_one_process_run_import_no_torch():
    program = "print(world_size(), rank(), all_reduce({a = [1, 2]}), broadcast(1), shard([1, 2]))"
    r = _python("import sys\nimport tapeml\nprint('torch' in sys.modules)")
    assert r.stdout == "False\n", r.stderr
    for source, shown in (("1", ""), (program, "1 0 {a = [1, 2]} 1 [1, 2]\n")):
        r = _python("import sys\nfrom tapeml.faces import cli\n"
                    f"code = cli.main(['-c', {source!r}])\nprint(code, 'torch' in sys.modules)")
        assert r.stdout == shown + "0 False\n", r.stdout + r.stderr


def test_without_torch_one_process_works_and_several_say_what_is_missing():
    """A NumPy-only install: torch cannot be imported."""
    prelude = "import sys\nsys.modules['torch'] = None\nfrom tapeml.faces import cli\n"
    program = "print(world_size(), all_reduce(2), shard([1, 2]))"
    r = _python(prelude + f"raise SystemExit(cli.main(['-c', {program!r}]))")
    assert (r.returncode, r.stdout) == (0, "1 2 [1, 2]\n"), r.stderr
    r = _python(prelude + "raise SystemExit(cli.main(['-c', '\\ny = all_reduce(2)']))",
                env={"WORLD_SIZE": "2", "RANK": "0", "MASTER_ADDR": "127.0.0.1", "MASTER_PORT": "1"})
    assert r.returncode == 1 and "Traceback" not in r.stdout + r.stderr
    assert ("<string>:2:5: ValueError: all_reduce() across 2 processes needs PyTorch (torch.distributed), which "
            "is not installed: pip install 'tapeml[torch]'") in r.stdout + r.stderr


# ---- several processes -----------------------------------------------------------------------------
def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _env(device: str = "numpy", **extra) -> dict:
    env = {k: v for k, v in os.environ.items() if k not in DIST_ENV}
    env.update(TAPEML_PROGRESS="0", TAPEML_DEVICE=device, OMP_NUM_THREADS="1", TAPEML_DIST_TIMEOUT="60")
    if any(name == "lo" for _, name in socket.if_nameindex()):
        env["GLOO_SOCKET_IFNAME"] = "lo"         # gloo over the loopback device, whatever the hostname says
    env.update(extra)
    return env


def _spawn(tmp_path, source: str, *args: str, n: int = 2, device: str = "numpy", **extra) -> list:
    """Run prog.ml (holding `source`) in n processes, ranks 0..n-1, as torchrun would start them;
    [(exit status, stdout, stderr)] by rank."""
    (tmp_path / "prog.ml").write_text(source, encoding="utf-8")
    port = _free_port()
    procs = []
    for r in range(n):
        env = _env(device, MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port), WORLD_SIZE=str(n), RANK=str(r),
                   LOCAL_RANK=str(r), **extra)
        procs.append(subprocess.Popen(TAPEML + ["prog.ml", *args], cwd=tmp_path, env=env, text=True,
                                      stdout=subprocess.PIPE, stderr=subprocess.PIPE))
    deadline = time.monotonic() + LIMIT
    out = []
    try:
        for p in procs:
            o, e = p.communicate(timeout=max(1.0, deadline - time.monotonic()))
            out.append((p.returncode, o, e))
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
                p.communicate()
    return out


def _torchrun(tmp_path, script: str, *args: str, n: int = 2, device: str = "numpy", **extra):
    """`torchrun --nproc-per-node n -m tapeml script args...` over the loopback address."""
    cmd = [sys.executable, "-m", "torch.distributed.run", "--nproc-per-node", str(n), "--master-addr", "127.0.0.1",
           "--master-port", str(_free_port()), "-m", "tapeml", script, *args]
    return subprocess.run(cmd, cwd=tmp_path, env=_env(device, **extra), capture_output=True, text=True,
                          timeout=LIMIT)


TRAIN = """\
seed(0)
X = randn(8, 3)
Y = randn(8, 2)
params = {w = randn(3, 2), b = zeros(2), s = 0.5}
params = broadcast(params)
for step in 1:3
    x = shard(X)
    y = shard(Y)
    loss, g = value_and_grad(fn(p) -> mean((tanh(x @ p.w + p.b) * p.s - y)^2), params)
    loss, g = all_reduce((loss, g))
    params = tree_map(fn(p, g) -> p - 0.1 * g, params, g)
    print("rank {rank()} step {step} loss {loss:.17g}")
end
save("params_{rank()}.npz", params)
"""


def _losses(text: str) -> list:
    """The losses printed, step 1 to 3 of each rank in turn (the lines of the ranks may interleave)."""
    pairs = re.findall(r"^rank (\d) step (\d) loss (\S+)$", text, re.M)
    return [float(v) for _, _, v in sorted(pairs)]


@pytest.mark.slow
@needs_torch
@pytest.mark.parametrize("device", ["numpy", "torch:cpu"])
def test_two_ranks_train_as_one_process_on_the_whole_batch(tmp_path, device):
    """torchrun, 2 processes, 3 steps: the ranks hold identical parameters, and the losses are one
    process's on the concatenated batch (shard(X) there is all of X) to 1e-10 in float64."""
    (tmp_path / "train.ml").write_text(TRAIN, encoding="utf-8")
    one = subprocess.run(TAPEML + ["train.ml"], cwd=tmp_path, env=_env(device), capture_output=True, text=True,
                         timeout=LIMIT)
    assert one.returncode == 0, one.stderr
    single = np.load(tmp_path / "params_0.npz")
    single = {k: single[k] for k in single.files}
    (tmp_path / "params_0.npz").unlink()
    two = _torchrun(tmp_path, "train.ml", device=device)
    assert two.returncode == 0, two.stdout + two.stderr
    ones, twos = _losses(one.stdout), _losses(two.stdout)
    assert len(ones) == 3 and len(twos) == 3 * 2, two.stdout          # both ranks print their 3 steps
    for step, alone in enumerate(ones, 1):
        both = twos[step - 1], twos[step + 2]
        assert both[0] == both[1], (step, both)                       # the ranks agree exactly
        assert abs(both[0] - alone) <= 1e-10, (step, both, alone)
    p0, p1 = np.load(tmp_path / "params_0.npz"), np.load(tmp_path / "params_1.npz")
    assert sorted(p0.files) == sorted(p1.files) == sorted(single)
    for k in p0.files:
        assert p0[k].dtype == np.float64
        assert np.array_equal(p0[k], p1[k]), k                          # identical parameters
        np.testing.assert_allclose(p0[k], single[k], rtol=0, atol=1e-10)


COLLECTIVES = """\
r = rank()
a = [1, 2] * (r + 1)
s = all_reduce(a, op="sum")
print("a", a, "sum", s, "mean", all_reduce(a), "max", all_reduce(a, op="max"), "min", all_reduce(a, op="min"))
t = {n = r + 0.25, m = {"k": [r, 1; 2, 3]}, u = (r, 10 * r)}
print("tree", all_reduce(t, op="sum"))
print("from 1", broadcast(t, src=1))
print("exact", all_reduce(1 / 3 * (1 - r), op="max") == 1 / 3, all_reduce(0.1) == 0.1, all_reduce([0.1, 0.2] + r * [0.2, 0.1]))
set_dtype("float32")
h = [1, 2] / 3 * (r + 1)
set_dtype("float64")
both = all_reduce((h, [1, 2] / 3 * (r + 1)), op="sum")
print("dtypes", dtype(both[0]), dtype(both[1]), round(both[0], 5), round(both[1], 5))
print("world", world_size(), r)
y = all_reduce(ones(2 + r))
"""


@needs_torch
def test_the_collectives_combine_every_leaf_and_leave_the_arguments_alone(tmp_path):
    out = _spawn(tmp_path, COLLECTIVES)
    for r, (code, text, err) in enumerate(out):
        lines = text.splitlines()
        assert lines[0] == f"a [{r + 1}, {2 * (r + 1)}] sum [3, 6] mean [1.5, 3] max [2, 4] min [1, 2]", err
        assert lines[1] == "tree {n = 1.5, m = {\"k\": [1, 2; 4, 6]}, u = (1, 10)}"
        assert lines[2] == "from 1 {n = 1.25, m = {\"k\": [1, 1; 2, 3]}, u = (1, 10)}"
        assert lines[3] == "exact true true [0.2, 0.25]"     # float64 crosses without rounding
        assert lines[4] == "dtypes float32 float64 [1, 2] [1, 2]"
        assert lines[5] == f"world 2 {r}"
        # and the last line passes trees of different shapes: every rank says so (gloo itself would
        # abort the process, or hand the smaller buffer the larger one's first numbers)
        assert code == 1 and "Traceback" not in err, err
        assert err == (f"prog.ml:15:5: ValueError: all_reduce(): the ranks passed trees of different shapes: tree is "
                       f"a vector of length 2 on rank 0 and a vector of length 3 on rank 1 (this is rank {r} of 2); "
                       f"every rank must pass the same structure, shapes and dtypes\n"
                       f"  15 | y = all_reduce(ones(2 + r))\n"
                       f"     |     ^^^^^^^^^^^^^^^^^^^^^^^\n")


# Each rank runs these in one Session, one after another (a refusal leaves the process group as it
# was: every rank saw the difference and gave up together); what each prints is compared exactly.
DISAGREE = [
    # the op: rank 0 sums [1, 5, 6] + [2, 10, 3] = [3, 15, 9], rank 1 takes the max [2, 10, 6]; mixing
    # the two gave [3, 15, 6] on both (gloo reduces buffer halves with each rank's op)
    ('x = ([1, 5, 6], [2, 10, 3])[rank()]\ny = all_reduce(x, op=("sum", "max")[rank()])',
     '2:5: all_reduce(): the ranks made different calls here: all_reduce(op="sum") on rank 0 and '
     'all_reduce(op="max") on rank 1 (this is rank {r} of 2); every rank must make the same call (all_reduce with '
     'the same op, broadcast with the same src) at the same point'),
    # "mean" against "sum": the same exchange, then one rank divides: the ranks held different values
    ('y = all_reduce([1, 2, 3] * (rank() + 1), op=("mean", "sum")[rank()])',
     '1:5: all_reduce(): the ranks made different calls here: all_reduce(op="mean") on rank 0 and '
     'all_reduce(op="sum") on rank 1 (this is rank {r} of 2); every rank must make the same call (all_reduce with '
     'the same op, broadcast with the same src) at the same point'),
    ('y = all_reduce([1, 2, 3] * (rank() + 1), op="sum")', "value [3, 6, 9]"),      # the group still works
    # the kind of collective: all_reduce on rank 0, broadcast on rank 1 (each names its own call first)
    ('y = (fn() -> all_reduce([1, 2, 3]), fn() -> broadcast([1, 2, 3]))[rank()]()',
     '1:{col}: {name}(): the ranks made different calls here: all_reduce(op="mean") on rank 0 and broadcast(src=0) on '
     'rank 1 (this is rank {r} of 2); every rank must make the same call (all_reduce with the same op, broadcast with '
     'the same src) at the same point'),
    ('y = broadcast([1, 2, 3], src=rank())',
     '1:5: broadcast(): the ranks made different calls here: broadcast(src=0) on rank 0 and broadcast(src=1) on rank 1 '
     '(this is rank {r} of 2); every rank must make the same call (all_reduce with the same op, broadcast with the '
     'same src) at the same point'),
    # a dtype difference is named (both ranks pass a vector of length 3)
    ('set_dtype(("float32", "float64")[rank()])\nx = [1, 2, 3]\nset_dtype("float64")\ny = all_reduce(x)',
     '4:5: all_reduce(): the ranks passed trees of different dtypes: tree is a float32 vector of length 3 on rank 0 '
     'and a float64 vector of length 3 on rank 1 (this is rank {r} of 2); every rank must pass the same structure, '
     'shapes and dtypes'),
    ('y = all_reduce({w = ones(2, 2 + rank()), b = 1})',
     '1:5: all_reduce(): the ranks passed trees of different shapes: tree.w is a 2x2 matrix on rank 0 and a 2x3 '
     'matrix on rank 1 (this is rank {r} of 2); every rank must pass the same structure, shapes and dtypes'),
    ('y = all_reduce(({w = [1, 2], b = 1}, {w = [1, 2], c = 1})[rank()])',
     '1:5: all_reduce(): the ranks passed trees of different structure: a record of 2 leaves (w, b) on rank 0 and a '
     'record of 2 leaves (w, c) on rank 1 (this is rank {r} of 2); every rank must pass the same structure, shapes '
     'and dtypes'),
    ('y = all_reduce([1, 2] * (rank() + 1), op="max")', "value [2, 4]"),
]

RUN_CASES = """\
import json, sys
import tapeml
s = tapeml.Session()
for source in json.loads(sys.argv[1]):
    try:
        s.run(source)
        print("value", s.eval("str(y)"))
    except tapeml.LangError as e:
        print(f"{e.line}:{e.column}: {e.kind}: {e.message}")
"""


@pytest.mark.slow
@needs_torch
@pytest.mark.parametrize("device", ["numpy", "torch:cpu"])
def test_ranks_that_call_different_collectives_are_refused_on_every_rank(tmp_path, device):
    """The op, the kind of collective, broadcast's src, and the tree's structure, shapes and dtypes
    are compared before any value moves; every rank says what each rank passed."""
    import json
    (tmp_path / "cases.py").write_text(RUN_CASES, encoding="utf-8")
    port = _free_port()
    procs = [subprocess.Popen([sys.executable, "cases.py", json.dumps([src for src, _ in DISAGREE])], cwd=tmp_path,
                              env=_env(device, MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port), WORLD_SIZE="2", RANK=str(r),
                                       LOCAL_RANK=str(r)), text=True, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
             for r in range(2)]
    outs = [p.communicate(timeout=LIMIT) for p in procs]
    for r, (p, (out, err)) in enumerate(zip(procs, outs)):
        assert (p.returncode, err) == (0, ""), err
        got = out.splitlines()
        assert len(got) == len(DISAGREE), out
        for (src, want), line in zip(DISAGREE, got):
            if not want.startswith("value"):
                kind_col = want.index(": ")
                want = (want[:kind_col] + ": ValueError" + want[kind_col:]).format(
                    r=r, col=(14, 45)[r], name=("all_reduce", "broadcast")[r])
            assert line == want, src


@needs_torch
def test_a_rank_that_cannot_reach_rank_0_prints_only_the_ioerror(tmp_path):
    """No one listens at MASTER_PORT: PyTorch's C++ side logs its connection retries with a
    backtrace (some 40 lines); the rank prints tapeml's one error and nothing else."""
    (tmp_path / "prog.ml").write_text("\ny = all_reduce([1, 2])\n", encoding="utf-8")
    env = _env(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(_free_port()), WORLD_SIZE="2", RANK="1", LOCAL_RANK="1",
               TAPEML_DIST_TIMEOUT="2")
    r = subprocess.run(TAPEML + ["prog.ml"], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=LIMIT)
    assert (r.returncode, r.stdout) == (1, "")
    port = env["MASTER_PORT"]
    assert r.stderr == (f"prog.ml:2:5: IOError: all_reduce(): rank 1 of 2 could not reach the other processes within "
                        f"2 s at 127.0.0.1:{port} (a rank stopped or never started; TAPEML_DIST_TIMEOUT sets the "
                        f"wait)\n  2 | y = all_reduce([1, 2])\n    |     ^^^^^^^^^^^^^^^^^^\n")


DIES = """\
x = all_reduce(1)
if rank() == 1
    error("rank 1 gives up")
end
y = all_reduce([1, 2])
print("rank {rank()} never gets here")
"""


@pytest.mark.slow
@needs_torch
def test_a_rank_that_dies_stops_the_others_with_an_error(tmp_path):
    (code0, out0, err0), (code1, out1, err1) = _spawn(tmp_path, DIES)
    assert (code0, code1) == (1, 1)
    assert "never gets here" not in out0 + out1
    # each rank prints its one error and nothing else (no log of PyTorch's C++ side)
    assert err1 == 'prog.ml:3:5: ValueError: rank 1 gives up\n  3 |     error("rank 1 gives up")\n    |     ^^^^^^^^^^^^^^^^^^^^^^^^\n'
    assert err0 == ("prog.ml:5:5: IOError: all_reduce(): rank 1 of 2 stopped (connection closed), so rank 0 stops too "
                    "(every rank must make the same all_reduce and broadcast calls; an error that stopped a rank is in "
                    "its output)\n  5 | y = all_reduce([1, 2])\n    |     ^^^^^^^^^^^^^^^^^^\n")


@pytest.mark.slow
@needs_torch
def test_a_rank_that_never_joins_ends_the_wait(tmp_path):
    source = "if rank() == 1\n    error(\"rank 1 stops before joining\")\nend\ny = all_reduce([1, 2])\n"
    (code0, _, err0), (code1, _, err1) = _spawn(tmp_path, source, TAPEML_DIST_TIMEOUT="3")
    assert (code0, code1) == (1, 1)
    assert "prog.ml:2:5: ValueError: rank 1 stops before joining" in err1
    assert ("prog.ml:4:5: IOError: all_reduce(): rank 0 of 2 waited 3 s for the other processes to join, and only "
            "1 of 2 did") in err0


@pytest.mark.slow
@needs_torch
def test_under_torchrun_a_dead_rank_fails_the_run(tmp_path):
    (tmp_path / "dies.ml").write_text(DIES, encoding="utf-8")
    r = _torchrun(tmp_path, "dies.ml")
    assert r.returncode != 0
    text = r.stdout + r.stderr
    assert "dies.ml:3:5: ValueError: rank 1 gives up" in text
    assert "never gets here" not in text
    # rank 0 says why it stops, unless torchrun's SIGTERM (sent once it saw rank 1 fail) came first
    assert "IOError: all_reduce(): rank 1 of 2 stopped (connection closed)" in text or "SIGTERM" in text


@pytest.mark.slow
@needs_torch
def test_minigpt_trains_data_parallel_as_one_process(tmp_path):
    """examples/minigpt.ml under torchrun, 2 ranks, 3 steps without dropout: rank 0 alone prints and
    saves; its parameters are one process's on the same batches (float64 sums in another order)."""
    script = os.path.join(ROOT, "examples", "minigpt.ml")
    opts = ["steps=3", "every=3", "batch=4", "context=16", "samples=8", "dropout=0", "plot=none"]
    one = subprocess.run(TAPEML + [script, *opts, f"checkpoint={tmp_path / 'one.npz'}"], cwd=tmp_path, env=_env(),
                         capture_output=True, text=True, timeout=LIMIT)
    assert one.returncode == 0, one.stderr
    two = _torchrun(tmp_path, script, *opts, f"checkpoint={tmp_path / 'two.npz'}")
    assert two.returncode == 0, two.stdout + two.stderr
    assert two.stdout.count("model: 2 pre-norm causal blocks") == 1
    assert two.stdout.count("--- greedy ---") == 1
    a, b = np.load(tmp_path / "one.npz"), np.load(tmp_path / "two.npz")
    assert sorted(a.files) == sorted(b.files) and len(a.files) > 10
    for k in a.files:
        np.testing.assert_allclose(b[k], a[k], rtol=0, atol=1e-10)
    odd = _torchrun(tmp_path, script, *opts[:2], "batch=3", *opts[3:], "checkpoint=none", n=2)
    assert odd.returncode != 0
    assert ("ValueError: shard(): x (3x16) has 3 along dim 0, which does not split into 2 equal parts, one per rank "
            "(3 = 2 x 1 + 1): make it a multiple of 2 (2 or 4)") in odd.stdout + odd.stderr
