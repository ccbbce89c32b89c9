"""Distributed: data-parallel training over torch.distributed (torchrun, gloo on the CPU, NCCL on
GPUs). Nothing here is home-made communication: the collectives are PyTorch's.

    torchrun --nproc-per-node 2 -m tapeml train.ml

torchrun starts the processes and tells each its place through the environment (WORLD_SIZE,
RANK, MASTER_ADDR, MASTER_PORT); `world_size()`, `rank()` and `shard()` read it and need no
communication. The process group is joined on the first `all_reduce` or `broadcast` (init_method
env://, gloo for NumPy and torch:cpu matrices, NCCL when the session's device is torch:cuda),
with a bounded wait (TAPEML_DIST_TIMEOUT seconds, 60 by default), so a rank that stopped makes
the others stop with an IOError instead of hanging. Before any value moves, the ranks compare what
they asked for (the collective, its op or src, the tree's structure, shapes and dtypes); ranks
that differ are refused, each saying what every rank passed. PyTorch's C++ log lines (connection
retries with a backtrace) are held while a collective runs and dropped when it fails: the
IOError alone says why.

Outside torchrun (no WORLD_SIZE, or WORLD_SIZE=1) the world is this one process: world_size() is
1, rank() 0, all_reduce and broadcast return their tree and shard its argument, and torch is
never imported (a NumPy-only install runs the same programs).

The process group is the process's (torch.distributed keeps one), not a session's: every
Session of one process shares it.
"""
from __future__ import annotations

import atexit
import contextlib
import math
import os
import re
import sys
import tempfile
import zlib

import numpy as np

from tapeml.array import backend as B
from tapeml.array import ops
from tapeml.array.tape import Box
from tapeml.array.values import describe, shape_text
from tapeml.builtins.registry import P, builtin, one_of
from tapeml.builtins.util import axis, tree_leaves, tree_map
from tapeml.syntax.errors import IOErr, ShapeError, TypeErr, ValueErr

CAT = "Distributed"
_FLOAT64 = np.dtype(np.float64)
DEFAULT_TIMEOUT = 60.0           # seconds a collective (and joining the group) may wait
OPS = ("mean", "sum", "max", "min")
SOURCE = ("PyTorch's torch.distributed (docs.pytorch.org/docs/stable/distributed.html) and the data-parallel "
          "recipe of DistributedDataParallel (docs.pytorch.org/docs/stable/notes/ddp.html)")

# the process group, joined once per process: "broken" keeps the message of a failed collective
# (the group cannot be used after one, so every later call repeats it)
_GROUP = {"joined": False, "broken": None, "device": "cpu"}


# ---- the world, from the environment ------------------------------------------------------------
def world() -> tuple[int, int]:
    """(world size, rank) as torchrun set them; (1, 0) outside torchrun or with WORLD_SIZE=1."""
    text = os.environ.get("WORLD_SIZE", "").strip()
    if not text:
        return 1, 0
    w = _whole_env("WORLD_SIZE", text)
    if w < 1:
        raise ValueErr(f"the environment's WORLD_SIZE must be a whole number >= 1, got \"{text}\"")
    if w == 1:
        return 1, 0
    rtext = os.environ.get("RANK", "").strip()
    if not rtext:
        raise ValueErr(f"WORLD_SIZE={w} is set but RANK is not: start the {w} processes with "
                       f"torchrun --nproc-per-node {w} -m tapeml script.ml (it sets both)")
    r = _whole_env("RANK", rtext)
    if not 0 <= r < w:
        raise ValueErr(f"the environment's RANK={r} is not a rank of a world of {w} (0 to {w - 1})")
    return w, r


def _whole_env(name: str, text: str) -> int:
    try:
        return int(text)
    except ValueError:
        raise ValueErr(f"the environment's {name} must be a whole number, got \"{text}\"") from None


def _timeout() -> float:
    text = os.environ.get("TAPEML_DIST_TIMEOUT", "").strip()
    if not text:
        return DEFAULT_TIMEOUT
    try:
        t = float(text)
    except ValueError:
        t = math.nan
    if not (math.isfinite(t) and t > 0):
        raise ValueErr(f"TAPEML_DIST_TIMEOUT must be a number of seconds > 0, got \"{text}\"")
    return t


# ---- the process group ------------------------------------------------------------------------------
def _join(fname: str, w: int, r: int):
    """torch, torch.distributed and the device buffers cross on, with this process in the group
    (joined on the first call: gloo, or NCCL when the session computes on a CUDA GPU)."""
    if _GROUP["broken"]:
        raise IOErr(_GROUP["broken"])
    try:
        import torch
        import torch.distributed as dist
    except ImportError:
        raise ValueErr(f"{fname}() across {w} processes needs PyTorch (torch.distributed), which is not "
                       f"installed: pip install 'tapeml[torch]'") from None
    if not dist.is_available():
        raise ValueErr(f"{fname}(): this PyTorch was built without torch.distributed")
    if not dist.is_initialized():
        import datetime
        be = B.current()
        nccl = be.name.startswith("torch:cuda")
        timeout = _timeout()
        extra = {}
        if nccl:
            torch.cuda.set_device(torch.device(be.device))
            extra["device_id"] = torch.device(be.device)
        try:
            with _native_log_held():
                dist.init_process_group("nccl" if nccl else "gloo", init_method="env://", world_size=w, rank=r,
                                        timeout=datetime.timedelta(seconds=timeout), **extra)
        except Exception as e:                        # noqa: BLE001 (torch raises several kinds)
            raise IOErr(_join_failed(fname, e, w, r, timeout)) from None
        _GROUP["joined"] = True
        _GROUP["device"] = be.device if nccl else "cpu"
        atexit.register(_leave)
    elif not _GROUP["joined"]:          # joined by the Python program around this session: its backend
        _GROUP["joined"] = "outside"
        if dist.get_backend() == "nccl":
            _GROUP["device"] = f"cuda:{torch.cuda.current_device()}"
    return torch, dist, _GROUP["device"]


def _leave():
    """At exit: leave the group (NCCL warns about a group never destroyed); not after a failure,
    when the peers may be gone."""
    if _GROUP["joined"] is not True or _GROUP["broken"]:
        return
    try:
        import torch.distributed as dist
        if dist.is_initialized():
            dist.destroy_process_group()
    except Exception:                                   # noqa: BLE001 (exiting anyway)
        pass


def _first_line(e: Exception) -> str:
    text = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
    return re.sub(r"^\[[^\]]*\.(cc|cpp|hpp|h)(:\d+)?\]\s*", "", text)     # gloo's source position


def _join_failed(fname: str, e: Exception, w: int, r: int, timeout: float) -> str:
    text = str(e)
    joined = re.search(r"(\d+)/(\d+) clients joined", text)
    if joined:
        return (f"{fname}(): rank {r} of {w} waited {timeout:g} s for the other processes to join, and only "
                f"{joined.group(1)} of {w} did (a rank stopped before its first all_reduce or broadcast, or "
                f"never started; TAPEML_DIST_TIMEOUT sets the wait)")
    for var in ("MASTER_ADDR", "MASTER_PORT"):
        if f"{var} expected" in text:
            return (f"{fname}(): WORLD_SIZE={w} says this is one of {w} processes, but {var} is not set: "
                    f"start them with torchrun --nproc-per-node {w} -m tapeml script.ml (or set MASTER_ADDR "
                    f"and MASTER_PORT)")
    low = text.lower()
    if "timed out" in low or "timeout" in low:
        return (f"{fname}(): rank {r} of {w} could not reach the other processes within {timeout:g} s at "
                f"{os.environ.get('MASTER_ADDR', '?')}:{os.environ.get('MASTER_PORT', '?')} (a rank stopped "
                f"or never started; TAPEML_DIST_TIMEOUT sets the wait)")
    return f"{fname}(): rank {r} of {w} could not join the other processes: {_first_line(e)}"


_CLOSED = ("connection closed", "connection reset", "broken pipe", "connection refused", "socket closed",
           "remote process exited", "peer", "nccl error", "ncclremoteerror")


def _collective_failed(fname: str, e: Exception, w: int, r: int) -> str:
    low = str(e).lower()
    timeout = _timeout()
    if "timed out" in low or "timeout" in low:
        msg = (f"{fname}(): rank {r} of {w} had no answer from the other ranks within {timeout:g} s (a rank "
               f"stopped, is stuck, or is not calling {fname} at this point of the program; "
               f"TAPEML_DIST_TIMEOUT sets the wait)")
    elif any(k in low for k in _CLOSED):
        who = f"rank {1 - r} of 2" if w == 2 else f"one of the other {w - 1} ranks"
        msg = (f"{fname}(): {who} stopped (connection closed), so rank {r} stops too (every rank must make "
               f"the same all_reduce and broadcast calls; an error that stopped a rank is in its output)")
    else:
        msg = f"{fname}(): rank {r} of {w} failed to exchange values: {_first_line(e)}"
    _GROUP["broken"] = msg
    return msg


# ---- trees of numbers and matrices -------------------------------------------------------------------
def _leaves(fname: str, tree) -> list:
    """(path, leaf) of tree's leaves (numbers and float matrices, in tuples, records and
    dictionaries) in tree_map's order; a TypeError naming the path of any other leaf."""
    pairs = tree_leaves(tree, "", "keep", f"{fname}(): tree")
    for path, leaf in pairs:
        t = type(leaf)
        if t is float or (t in B.ARRAYS and B.of(leaf).is_float(leaf)):
            continue
        where = "tree" if not path else ("tree" + path if path[0] == "[" else "tree." + path)
        if t is Box:
            raise TypeErr(f"{fname}(): {where} is being differentiated (it depends on the input of grad), and "
                          f"{fname}() has no gradient: call it on what grad returns (the gradients), or on "
                          f"stop_gradient(...) of the value")
        raise TypeErr(f"{fname}(): {where} is {describe(leaf)}; only numbers and float matrices (in tuples, "
                      f"records and dictionaries) cross between processes")
    return pairs


def _dtype_name(leaf) -> str:
    t = type(leaf)
    if t is float:
        return "float64"
    return (leaf.dtype if t is np.ndarray else B.of(leaf).np_dtype(leaf.dtype)).name


def _checks(call: str, pairs: list) -> list:
    """What every rank must pass alike, in the order a difference is reported: the call itself
    (all_reduce or broadcast, with its op or src), the tree's structure (its leaves' paths), their
    shapes, their dtypes."""
    return [call, "\n".join(p for p, _ in pairs),
            "\n".join(f"{p}:{tuple(np.shape(leaf)) if type(leaf) is float else tuple(leaf.shape)}" for p, leaf in pairs),
            "\n".join(f"{p}:{_dtype_name(leaf)}" for p, leaf in pairs)]


def _signature(texts: list) -> list:
    """One number per check, the same on every rank whose check is the same: 32 bits of a CRC (+1,
    never 0), exact in a float64."""
    return [float(zlib.crc32(t.encode()) + 1) for t in texts]


def _exchange(fname: str, tree, op: str | None, src: int):
    """The collective on every leaf of tree: all_reduce with `op`, or broadcast from `src` when op
    is None. First the ranks compare their trees' signatures (one all_reduce of two numbers: gloo
    aborts the process when two ranks send buffers of different sizes, so sizes must agree before
    any data moves); then the leaves go in one buffer per dtype, one collective each. A new tree
    of new values; the arguments are left as they were."""
    w, r = world()
    pairs = _leaves(fname, tree)
    if w == 1:
        return tree
    torch, dist, dev = _join(fname, w, r)
    leaves = [leaf for _, leaf in pairs]
    call = f'all_reduce(op="{op}")' if op is not None else f"broadcast(src={src})"
    checks = _checks(call, pairs)
    sig = _signature(checks)
    head = torch.tensor(sig + [-x for x in sig], dtype=torch.float64, device=dev)
    _collective(fname, lambda: dist.all_reduce(head, op=dist.ReduceOp.MAX), w, r)
    if head.tolist() != sig + [-x for x in sig]:            # max == min: every rank's is the same
        # every rank sees the difference, so every rank takes part in gathering what each passed
        mine = (call, _tree_text(tree, pairs), [(p, describe(leaf), _leaf_text(leaf)) for p, leaf in pairs], checks)
        theirs = [None] * w
        _collective(fname, lambda: dist.all_gather_object(theirs, mine), w, r)
        raise ValueErr(_mismatch(fname, theirs, r, w))
    groups: dict = {}                    # NumPy dtype -> the indices of its leaves
    for i, leaf in enumerate(leaves):
        t = type(leaf)
        dt = _FLOAT64 if t is float else leaf.dtype if t is np.ndarray else B.of(leaf).np_dtype(leaf.dtype)
        groups.setdefault(dt, []).append(i)
    reduce_op = None if op is None else {"mean": dist.ReduceOp.SUM, "sum": dist.ReduceOp.SUM,
                                         "max": dist.ReduceOp.MAX, "min": dist.ReduceOp.MIN}[op]
    out = [None] * len(leaves)
    for dt in sorted(groups, key=lambda d: d.str):     # the same order on every rank
        items = groups[dt]
        buf = _buffer(torch, [leaves[i] for i in items], dt, dev)
        if reduce_op is None:
            _collective(fname, lambda: dist.broadcast(buf, src=src), w, r)
        else:
            _collective(fname, lambda: dist.all_reduce(buf, op=reduce_op), w, r)
        host = None
        if all(type(leaves[i]) is not float and type(leaves[i]) is not np.ndarray for i in items):
            if op == "mean":
                buf.div_(w)                             # our own buffer: divided in place
        else:
            host = buf.to("cpu").numpy()                # one copy to the host per buffer (none on the CPU)
            if op == "mean":
                np.divide(host, w, out=host)            # (by NumPy: torch's threads fight on a busy CPU)
                buf = torch.from_numpy(host).to(buf.device)
        off = 0
        for i in items:
            leaf = leaves[i]
            t = type(leaf)
            n = 1 if t is float else math.prod(leaf.shape)
            if t is float:
                out[i] = float(host[off])
            elif t is np.ndarray:
                out[i] = host[off:off + n].reshape(leaf.shape)
            else:
                out[i] = buf[off:off + n].reshape(leaf.shape).to(leaf.device)
            off += n
    it = iter(out)
    return tree_map(lambda v: next(it), tree, f"{fname}(): tree")


def _buffer(torch, leaves: list, dt: np.dtype, dev: str):
    """One new flat buffer on dev holding leaves of one dtype, in order (the arguments stay as they
    were): NumPy arrays and numbers are joined by NumPy and cross to torch once, tensors by torch.cat."""
    if all(type(v) is float or type(v) is np.ndarray for v in leaves):
        flat = np.concatenate([v.reshape(-1) if type(v) is np.ndarray else np.array([v]) for v in leaves])
        return torch.from_numpy(flat.astype(dt, copy=False)).to(dev)
    parts = []
    for v in leaves:
        t = type(v)
        if t is float:
            parts.append(torch.tensor([v], dtype=torch.float64, device=dev))
        elif t is np.ndarray:
            parts.append(torch.from_numpy(np.array(v, order="C").reshape(-1)).to(dev))
        else:
            parts.append(v.detach().reshape(-1).to(dev))
    return torch.cat(parts)


def _collective(fname: str, run, w: int, r: int):
    try:
        with _native_log_held():
            run()
    except Exception as e:                          # noqa: BLE001 (gloo and NCCL raise several kinds)
        raise IOErr(_collective_failed(fname, e, w, r)) from None


@contextlib.contextmanager
def _native_log_held():
    """PyTorch's C++ side (c10d's connection retries, gloo) writes its log lines and backtraces to
    the process's stderr itself, some 40 lines before tapeml's one IOError when a rank cannot reach
    rank 0: while a join or a collective runs, file descriptor 2 goes to a temporary file, whose
    text is written out after a success and dropped after a failure (the IOError says what
    failed). Python's own stderr is flushed first, so nothing written before is held."""
    try:
        sys.stderr.flush()
        saved = os.dup(2)
    except (OSError, ValueError, AttributeError):        # no file descriptor 2: nothing to hold
        yield
        return
    ok = False
    with tempfile.TemporaryFile() as held:
        os.dup2(held.fileno(), 2)
        try:
            yield
            ok = True
        finally:
            os.dup2(saved, 2)
            os.close(saved)
            if ok and held.tell():
                held.seek(0)
                os.write(2, held.read())


def _tree_text(tree, pairs) -> str:
    """What this rank passed, for the message about ranks passing trees of different structure."""
    if len(pairs) == 1 and pairs[0][0] == "":
        return describe(tree)
    shown = ", ".join(p for p, _ in pairs[:4]) + (", ..." if len(pairs) > 4 else "")
    return f"{describe(tree)} of {len(pairs)} leaves ({shown})"


def _leaf_text(leaf) -> str:
    """A leaf with its float type: "a float32 vector of length 3", "a number"."""
    text = describe(leaf)
    if type(leaf) is float:
        return text
    return f"a {_dtype_name(leaf)} {text[2:]}" if text.startswith("a ") else text


def _by_rank(values: list) -> str:
    """ "x on rank 0 and y on rank 1" (ranks with the same value together: "on ranks 0, 2")."""
    groups: dict = {}
    for rank_, v in enumerate(values):
        groups.setdefault(v, []).append(rank_)
    parts = [f"{v} on rank{'s' if len(rs) > 1 else ''} {', '.join(map(str, rs))}" for v, rs in groups.items()]
    return ", ".join(parts[:-1]) + " and " + parts[-1] if len(parts) > 1 else parts[0]


def _mismatch(fname: str, theirs: list, r: int, w: int) -> str:
    """The error when the ranks' calls differ: the first check that differs (the call, the tree's
    structure, a leaf's shape, a leaf's dtype), with what each rank passed."""
    calls, trees, leaves, checks = zip(*theirs)
    me = f"(this is rank {r} of {w})"
    if len(set(c[0] for c in checks)) > 1:
        return (f"{fname}(): the ranks made different calls here: {_by_rank(calls)} {me}; every rank must make "
                f"the same call (all_reduce with the same op, broadcast with the same src) at the same point")
    if len(set(c[1] for c in checks)) > 1:
        return (f"{fname}(): the ranks passed trees of different structure: {_by_rank(trees)} {me}; every rank "
                f"must pass the same structure, shapes and dtypes")
    k, what = (2, "shapes") if len(set(c[2] for c in checks)) > 1 else (3, "dtypes")
    lines = [c[k].split("\n") for c in checks]
    j = next(j for j in range(len(lines[0])) if len(set(ls[j] for ls in lines)) > 1)
    path = leaves[0][j][0]
    where = "tree" if not path else ("tree" + path if path[0] == "[" else "tree." + path)
    return (f"{fname}(): the ranks passed trees of different {what}: {where} is {_by_rank([lv[j][k - 1] for lv in leaves])} "
            f"{me}; every rank must pass the same structure, shapes and dtypes")


# ---- the builtins ---------------------------------------------------------------------------------------
RUN = ("torchrun --nproc-per-node N -m tapeml script.ml")


@builtin("world_size", CAT, "How many processes train together: N under torchrun --nproc-per-node N, else 1.",
         [], returns="number",
         what="The number of ranks (processes) of a data-parallel run: each runs the same program on its own "
              "part of the data (shard), and all_reduce averages what they computed. Run one with `"
              + RUN + "`. In a plain `tapeml script.ml` run, the REPL, a notebook or the Python API it is 1, "
                      "so a program written for several processes runs unchanged in one.",
         how="The environment's WORLD_SIZE, which torchrun sets for each process it starts (PyTorch's "
             "`torch.distributed.get_world_size()`); no WORLD_SIZE is a world of 1. Reading it needs no "
             "communication and never imports torch. Source: " + SOURCE + ".",
         errors=["ValueError when the environment's WORLD_SIZE is not a whole number >= 1, or RANK is missing or "
                 "out of range while WORLD_SIZE > 1"],
         examples=["world_size()", "if world_size() == 1\n    print(\"one process\")\nend"])
def world_size():
    return float(world()[0])


@builtin("rank", CAT, "This process's number among world_size() processes: 0, 1, ..., world_size() - 1.",
         [], returns="number",
         what="Which of the processes of a data-parallel run this one is: 0 to world_size() - 1, and 0 in a "
              "single process. Every rank runs the whole program and prints everything it prints, so guard "
              "what should appear once: `if rank() == 0 print(...) end`; and let one rank write files "
              "(save, savefig), as two processes writing one file would mix their writes.",
         how="The environment's RANK, set by torchrun (PyTorch's `torch.distributed.get_rank()`); 0 without "
             "WORLD_SIZE or with WORLD_SIZE=1. Needs no communication. Source: " + SOURCE + ".",
         errors=["ValueError when the environment's WORLD_SIZE or RANK is not a whole number, or RANK is out "
                 "of range"],
         examples=["rank()", "if rank() == 0\n    print(\"only rank 0 prints this\")\nend"])
def rank():
    return float(world()[1])


@builtin("all_reduce", CAT, "Combine a tree of numbers and matrices across the processes: the mean (default), "
         "sum, max or min of each element over the ranks, on every rank.",
         [P("tree", "tree", doc="a number, a float matrix, or tuples, records and dictionaries of them (gradients, "
                                "a loss); the same structure, shapes and dtypes on every rank", shape="any"),
          P("op", "string", "mean", doc='"mean" (data-parallel gradients), "sum", "max" or "min", element by element',
            check=one_of(*OPS), constraint="one of " + ", ".join(f'"{o}"' for o in OPS))],
         returns="a tree of the same structure, shapes and dtypes",
         what="The step that makes data-parallel training: each rank computes the gradient of the loss on its "
              "own shard of the batch, and `grads = all_reduce(grads)` gives every rank the mean of them, which "
              "with equal shards is the gradient of the whole batch; the same optimizer step on every rank then "
              "keeps the parameters identical. `loss, grads = all_reduce((loss, grads))` averages the loss in "
              "the same exchange. In a single process (world_size() 1) it returns tree itself.",
         how="`torch.distributed.all_reduce` with ReduceOp.SUM (divided by world_size() for \"mean\", as "
             "DistributedDataParallel averages gradients), MAX or MIN. The leaves are flattened into one buffer "
             "per dtype, so a tree of any size costs one collective per dtype; NumPy matrices cross as torch CPU "
             "tensors (float64 kept exactly), tensors as they are. Before them the ranks compare checksums of "
             "the call (all_reduce or broadcast, its op) and of their trees' structure, shapes and dtypes (one "
             "all_reduce of eight numbers), so ranks that make different calls or pass different trees get an "
             "error naming what each rank passed, where gloo alone would abort the process, mix two ops or "
             "hand one rank the other's numbers. Not differentiable: call it on what grad returns. The first call joins "
             "the process group (gloo, or NCCL on torch:cuda); a rank that does not answer within "
             "TAPEML_DIST_TIMEOUT seconds (default 60) is an error. Source: " + SOURCE + ".",
         errors=["TypeError when a leaf is not a number or a float matrix (a string, a bool), naming its path, or "
                 "when it is being differentiated",
                 "ValueError when op is not one of \"mean\", \"sum\", \"max\", \"min\"",
                 "ValueError when the ranks pass trees of different structure, shapes or dtypes, or make different "
                 "calls (another op, or broadcast on one rank)",
                 "IOError when another rank stopped (\"rank 1 of 2 stopped (connection closed)\") or did not answer "
                 "within TAPEML_DIST_TIMEOUT seconds",
                 "ValueError when several processes are asked for and PyTorch is not installed"],
         examples=["all_reduce(0.5)  # one process: the tree itself",
                   "grads = {w = [0.1, -0.2; 0.3, 0.4], b = 0.5}\nall_reduce(grads, op=\"max\")",
                   "loss = 1.25\ng = ([1, 2], {w = [3, 4]})\nloss, g = all_reduce((loss, g))\nprint(loss, g)"])
def all_reduce(tree, op):
    return _exchange("all_reduce", tree, op, 0)


@builtin("broadcast", CAT, "Give every process rank src's copy of a tree of numbers and matrices.",
         [P("tree", "tree", doc="a number, a float matrix, or tuples, records and dictionaries of them; the same "
                                "structure, shapes and dtypes on every rank (the others' values are replaced)",
            shape="any"),
          P("src", "int", 0, doc="the rank whose values every rank gets (0 to world_size() - 1)")],
         returns="a tree of the same structure, shapes and dtypes, holding rank src's values",
         what="Makes the ranks start from the same parameters: `params = broadcast(params)` after initialising "
              "them gives every rank rank 0's, whatever each drew (DistributedDataParallel does the same when "
              "it wraps a model). Seeding every rank alike (seed(0)) gives the same parameters too; broadcast "
              "also covers parameters loaded by one rank. In a single process it returns tree itself.",
         how="`torch.distributed.broadcast` from src, the leaves flattened into one buffer per dtype, after "
             "the ranks compared checksums of the call (broadcast and its src) and of their trees' structure, "
             "shapes and dtypes (as all_reduce does), so a rank with a different tree, another src or another "
             "collective gets an error. NumPy matrices cross as torch CPU tensors, float64 "
             "exactly; the arguments are not changed. Not differentiable. Source: "
             + SOURCE + ".",
         errors=["ValueError when src is not a rank (0 to world_size() - 1)",
                 "TypeError when a leaf is not a number or a float matrix, naming its path",
                 "ValueError when the ranks pass trees of different structure, shapes or dtypes, or make different "
                 "calls (another src, or all_reduce on one rank)",
                 "IOError when another rank stopped or did not answer within TAPEML_DIST_TIMEOUT seconds"],
         examples=["seed(0)\nparams = {w = randn(2, 2), b = zeros(2)}\nparams = broadcast(params)\n"
                   "print(round(params.w, 3))"])
def broadcast(tree, src):
    w, _ = world()
    if not 0 <= src < w:
        raise ValueErr(f"broadcast(): src={src} is not a rank of this world of {w} "
                       f"process{'es' if w > 1 else ''} (ranks 0 to {w - 1})")
    return _exchange("broadcast", tree, None, src)


@builtin("shard", CAT, "This process's equal part of x along an axis: rows rank() * n / world_size() onward.",
         [P("x", "array", doc="a vector or matrix, e.g. a batch with the examples along dim", shape="[..., n, ...]"),
          P("dim", "int", 0, doc="the axis to split (negative counts from the end)")],
         returns="x with n / world_size() along dim",
         differentiable=True,
         what="Splits a batch among the ranks: with N processes, rank r gets the r-th of N equal slices along "
              "dim (rows r * n / N to (r + 1) * n / N - 1 for dim 0). Every rank draws the same whole batch "
              "(the same seed) and trains on its shard; all_reduce(grads) then averages the shards' "
              "gradients into the whole batch's. In a single process it returns x itself.",
         how="PyTorch's DistributedSampler gives each rank every N-th example; shard gives each a contiguous "
             "slice instead, so the ranks' shards concatenated in rank order are the batch. The sizes must "
             "divide (DDP's gradient average equals the whole batch's only for equal shards): a size that does "
             "not is an error, not a short last shard. It is an index of x, so its gradient puts the cotangent "
             "back in place. Reads WORLD_SIZE and RANK; no communication. Source: " + SOURCE + ".",
         errors=["ValueError naming the sizes when the length of x along dim is not a multiple of world_size()",
                 "ValueError when dim is out of range", "ShapeError when x is a number"],
         examples=["shard([1, 2; 3, 4; 5, 6; 7, 8])  # one process: all of it",
                   "x = reshape(1:12, 3, 4)\nsize(shard(x, dim=1))"])
def shard(x, dim):
    shape = ops.shape_of(x)
    if not shape:
        raise ShapeError(f"shard() needs a vector or matrix to split, got {describe(x)}")
    d = axis(x, dim)
    w, r = world()
    if w == 1:
        return x
    n = shape[d]
    if n % w:
        lo, hi = (n // w) * w, (n // w + 1) * w
        near = f"{hi}" if lo == 0 else f"{lo} or {hi}"
        raise ValueErr(f"shard(): x ({shape_text(shape)}) has {n} along dim {d}, which does not split into "
                       f"{w} equal parts, one per rank ({n} = {w} x {n // w} + {n % w}): make it a multiple of "
                       f"{w} ({near})")
    m = n // w
    return ops.index(x, idx=(slice(None),) * d + (slice(r * m, (r + 1) * m),))
