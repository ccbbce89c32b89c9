"""Constructors, random draws, shapes and joins on every backend (issue 27): a program prints the
same on torch:cpu as on NumPy, byte for byte (seeded draws too: they come from the session's NumPy
generator on the host and are then moved to the device), and its matrices live on the session's
device; the size guard reads the memory of the session's device."""
import importlib.util
import io

import numpy as np
import pytest

from tapeml.array import backend as B, context, limits
from tapeml.syntax.errors import LangError

from support import error_of

PROGRAMS = {
    "constructors": "print(zeros(2, 3), ones(2), fill(7, 2, 2), fill(0.5, 3), eye(3), zeros(0), size(zeros(0, 3)))\n"
                    "print(linspace(0, 1, 7), linspace(-3.3, 1e5, 4), linspace(2, 3, 1), size(linspace(0, 1, 0)))\n"
                    "print(range(4), range(2, 5), range(0, 10, 3), range(0, 0.3, 0.1), 1:4, unique([3, 1, 3, 2, 1, 0 / 0, 0 / 0]))\n"
                    "print(zeros_like([1, -1 / 0, 0 / 0]), ones_like({w = [1, 2; 3, 4], b = (3, [true, false])}))\n"
                    "x = [1, 2; 3, 4]\nprint(zeros(size(x)), eye(3) @ [1, 2, 3], linspace(0, 1, 3) * 2)",
    "random": "seed(0)\nprint(rand(), rand(3), randn(2, 2), randint(0, 10, 5), randint(1, 7), randperm(6))\n"
              "print(round(randn(), 6), sample([0.1, 0.2, 0.7]), sample([0.1, 0.2, 0.7], 8))\n"
              "print(sample([0.5, 0.5, 0; 0, 0.1, 0.9]), sample([0.5, 0.5, 0; 0, 0.1, 0.9], 3))\n"
              "print(sample([1, 1, 1, 1], 4, replacement=false), size(rand(0, 4)), size(randn(3, 0)))\n"
              "seed(7)\na = randn(64, 32)\nb = rand(32)\nprint(sum(a), sum(b), max(a), min(b), sum(a @ b))\n"
              "seed(1)\nprint(randperm(3) + 1, randperm(0))\n",
    "shapes": "m = reshape(1:12, 3, 4)\n"
              "print(reshape(1:6, 2, 3), reshape(1:6, -1, 2), flatten(m'), squeeze([1.5; 2]), size(squeeze(zeros(2, 1, 3))))\n"
              "print(expand_dims([1, 2], 0), expand_dims([1, 2], -1), permute(m, 1, 0), size(permute(zeros(2, 3, 4), 2, 0, 1)))\n"
              "print(tile([1, 2], 2, 2), repeat([1, 2; 3, 4], 2, dim=0), repeat([1, 2; 3, 4], 2), roll([1, 2, 3, 4], 1))\n"
              "print(roll(m, -1, dim=1), chunk(1:5, 4), tril(m), triu(m, k=1), tril(m, k=-1) > 0, triu(m > 5))\n"
              "print(concat([1, 2], [3]), concat(0, [1, 2], 3), concat([1, 2; 3, 4], [5, 6; 7, 8], dim=1))\n"
              "print(stack([1, 2], [3, 4]), stack([1, 2], [3, 4], dim=1), stack(map(fn(i) -> [i, i ^ 2], (1, 2, 3))))\n"
              "print(vector((1.5, 2, 3)) * 2, vector(()), vector(3), vector((true, false)), [1, 2, 3] > 2)\n"
              "print(concat([1, 2] > 1, [0.5]), stack([true, false], [1, 2]), concat(map(fn(n) -> zeros(n) + n, (1, 2))))\n"
              "print(len(m), len(zeros(4, 2)), size(m), size(m, -1), dtype(m), dtype(m > 2), char_codes(\"Hi!\"))\n"
              "print(from_char_codes([72, 105, 33]), from_char_codes(char_codes(\"héllo\")))\n",
    "float32": "set_dtype(\"float32\")\nseed(3)\n"
               "print(dtype(zeros(2)), dtype(ones(2)), dtype(fill(1, 2)), dtype(eye(2)), dtype(linspace(0, 1, 3)))\n"
               "print(dtype(rand(2)), dtype(randn(2)), dtype(randint(0, 3, 2)), dtype(randperm(3)), dtype(zeros_like(rand(2))))\n"
               "print(rand(), rand(3), randn(2), linspace(0, 1, 3) / 3, dtype(concat(rand(2), [1])), dtype(stack(rand(2), [1, 2])))\n",
}


def _run(source: str, device: str) -> str:
    from tapeml import Session
    out = io.StringIO()
    Session(device=device, out=out).run(source)
    return out.getvalue()


@pytest.mark.parametrize("name", sorted(PROGRAMS))
def test_torch_cpu_prints_what_numpy_prints(name):
    pytest.importorskip("torch")
    pytest.importorskip("array_api_compat")
    want = _run(PROGRAMS[name], "numpy")
    assert "Error" not in want
    assert _run(PROGRAMS[name], "torch:cpu") == want


def test_constructors_and_draws_make_tensors_on_the_session_device():
    torch = pytest.importorskip("torch")
    pytest.importorskip("array_api_compat")
    from tapeml import Session
    s = Session(device="torch:cpu", seed=0)
    s.run("a = zeros(2)\nb = ones(2, 2)\nc = fill(3, 2)\nd = eye(2)\ne = linspace(0, 1, 3)\nf = rand(2)\n"
          "g = randn(2)\nh = randint(0, 4, 3)\ni = randperm(3)\nj = sample([1, 2; 3, 4], 2)\nk = zeros_like([1, 2])\n"
          "l = char_codes(\"ab\")\nm = vector((1, 2))\nn = concat(a, c)\no = stack(a, a)\np = tril(b)\nq = 0:3\n"
          "r = unique([2, 1, 2])\nt = vector(1)\nu = tril(b > 0)")
    values = s.interp.variables()
    for name, v in values.items():
        assert type(v) is torch.Tensor and v.device.type == "cpu", name
    assert values["h"].dtype == torch.float64 and values["u"].dtype == torch.bool


def test_numpy_sessions_make_numpy_arrays():
    from tapeml import Session
    s = Session(seed=0, device="numpy")
    s.run("a = zeros(2)\nb = rand(2)\nc = randint(0, 4, 3)\nd = linspace(0, 1, 3)\ne = concat(a, b)\nf = tril(ones(2, 2))")
    assert all(type(v) is np.ndarray for v in s.interp.variables().values())


@pytest.mark.numpy_only      # the session starts on NumPy, so torch:cpu is another device
def test_a_constructor_makes_a_matrix_so_set_device_is_refused_after_it():
    """Without PyTorch (the README's install has none) the refusal says what to install first."""
    has_torch = importlib.util.find_spec("torch") is not None and importlib.util.find_spec("array_api_compat") is not None
    for first in ("zeros(2)", "ones(1)", "fill(2, 1)", "eye(1)", "rand(2)", "linspace(0, 1, 2)"):
        err = error_of(f'x = {first}\nset_device("torch:cpu")')
        if has_torch:
            assert "already made matrices on numpy" in err.message, first
        else:
            assert "device torch:cpu needs PyTorch, which is not installed" in err.message, first


class _FakeGPU(B.Backend):
    """A backend whose device has 2 GiB of memory (the size guard reads it as a GPU's)."""
    name = "torch:cuda:fake"

    def memory_bytes(self):
        return 2 * 1024 ** 3


def test_the_size_guard_reads_the_memory_of_the_sessions_device(monkeypatch):
    monkeypatch.setattr(limits, "_DEVICE_ELEMENTS", {})
    host = limits.max_elements()
    assert host == limits.MAX_ELEMENTS
    with context.State(backend=_FakeGPU()):
        assert limits.max_elements() == 2 * 1024 ** 3 // 2 // 8 == 134_217_728
        with pytest.raises(LangError) as info:
            limits.check_elements("zeros(200000000)", (200_000_000,))
        assert "the limit is 1.07 GB (half the memory of torch:cuda:fake, at most 8 GB)" in info.value.message
        with pytest.raises(LangError, match="past the limit of 134000000 elements"):
            limits.check_shape("zeros(0, 200000000)", (0, 200_000_000))
    assert limits.max_elements() == host


def test_a_product_past_the_devices_limit_is_refused_before_it_is_made(monkeypatch):
    """The guard's test on another backend's matrices reads the session device's limit (a GPU's
    memory), not the host's: an outer sum of 12000 x 12000 is under the host's limit and past a
    2 GiB device's, for the arithmetic (core_ops) and a guarded primitive (maximum)."""
    pytest.importorskip("torch")
    pytest.importorskip("array_api_compat")
    from tapeml.array import ops
    monkeypatch.setattr(limits, "_DEVICE_ELEMENTS", {})
    cpu = B.make("torch:cpu")
    a, b = cpu.asarray(np.zeros((12000, 1))), cpu.asarray(np.zeros((1, 12000)))
    assert 12000 * 12000 < limits.MAX_ELEMENTS
    with context.State(backend=_FakeGPU()):
        for f in (ops.add, ops.maximum):
            with pytest.raises(LangError, match="half the memory of torch:cuda:fake"):
                f(a, b)


def test_a_lowered_host_limit_also_bounds_a_device(monkeypatch):
    monkeypatch.setattr(limits, "_DEVICE_ELEMENTS", {})
    monkeypatch.setattr(limits, "MAX_ELEMENTS", 1000)
    with context.State(backend=_FakeGPU()):
        assert limits.max_elements() == 1000


def test_a_host_device_keeps_the_host_limit():
    pytest.importorskip("torch")
    pytest.importorskip("array_api_compat")
    with context.State(backend=B.make("torch:cpu")):
        assert limits.max_elements() == limits.MAX_ELEMENTS


class _FakeMPS(B.Backend):
    name, device = "torch:mps", "mps"


def test_set_dtype_float64_on_mps_says_float32_only():
    from support import fresh, run
    with context.State(backend=_FakeMPS()):
        with pytest.raises(LangError, match=r'set_dtype\(\): torch:mps has float32 matrices only'):
            run('set_dtype("float64")', fresh(prelude=False))
        run('set_dtype("float32")', fresh(prelude=False))


def test_a_device_out_of_memory_reads_as_memory_not_as_shapes(monkeypatch):
    """PyTorch says a GPU ran out of memory with a RuntimeError (torch.OutOfMemoryError), its
    word for operands that do not fit too: an operator says 'not enough memory' with its span,
    a builtin the same, and one raised anywhere else ends the run as MemoryError does."""
    pytest.importorskip("torch")
    pytest.importorskip("array_api_compat")
    import torch
    from tapeml.builtins.registry import REGISTRY
    from tapeml.evaluator import semantics
    from tapeml.faces import runner
    from tapeml.evaluator.interpreter import Interpreter

    def no_memory(*args, **kw):
        raise torch.OutOfMemoryError("CUDA out of memory. Tried to allocate 8.00 GiB")
    assert B.is_out_of_memory(torch.OutOfMemoryError("x")) and B.is_out_of_memory(MemoryError())
    assert not B.is_out_of_memory(RuntimeError("The size of tensor a (2) must match the size of tensor b (3)"))
    monkeypatch.setitem(semantics.BINARY, "+", no_memory)
    cpu = B.make("torch:cpu")
    a = cpu.asarray(np.zeros((2, 3)))
    with pytest.raises(LangError, match=r"not enough memory for '\+' of 2x3 and 2x3") as info:
        semantics.binary("+", a, a, None)
    assert info.value.kind == "ValueError"
    monkeypatch.setattr(REGISTRY["softmax"], "fn", no_memory)
    out = runner.run_cell(Interpreter(), "x = [1, 2]\nsoftmax(x)\n", "<t>")
    assert out.status == runner.ERROR and out.message == "softmax(): not enough memory for this computation"
    monkeypatch.setattr(Interpreter, "run", no_memory)
    assert runner.run_cell(Interpreter(), "1", "<t>").status == runner.MEMORY
