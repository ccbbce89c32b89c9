"""The cases tests/perf/ab.py timed for issue 28's items 2-4 (the tape, the trust checks, builtin
binding). Each setup returns a callable; `number` calls make one timing. Names ending in
`_grad`/`_plain` are paired: their difference over N_OPS is one recorded op's tape share."""
import os
import sys
import textwrap

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
N_OPS = 2000


def _ml(code, name="bench"):
    from tapeml.evaluator.interpreter import Interpreter
    interp = Interpreter()
    interp.run(textwrap.dedent(code), "<ab>")
    fn = interp.get_variable(name) if hasattr(interp, "get_variable") else interp.globals.vars[name]
    return lambda: interp.call(fn, [], {}, None)


def _loop(op, recorded):
    return lambda: _ml(f"""
        x = [1, 2; 3, 4]
        fn f(x)
          y = x
          for i in 1:{N_OPS}
            y = y {op} 1.0001
          end
          return sum(y)
        end
        fn bench() -> {"grad(f, x)" if recorded else "f(x)"}
        """)


class _Ctx:
    """The one Context method value_and_grad uses, for calling a Python function."""
    @staticmethod
    def call(f, *args):
        return f(*args)

    @staticmethod
    def argument_name(i):
        return None


def _py_loop(name, recorded):
    """The same loop in Python on the primitives: the tape without the interpreter."""
    def setup():
        from tapeml.array import ops
        from tapeml.builtins.autodiff import value_and_grad_impl
        op = getattr(ops, name)
        x = np.array([[1.0, 2.0], [3.0, 4.0]])

        def f(y):
            for _ in range(N_OPS):
                y = op(y, 1.0001)
            return ops.sum_(y)
        if recorded:
            return lambda: value_and_grad_impl(_Ctx, f, x)
        return lambda: f(x)
    return setup


def _block(T, D, H):
    """The post-norm block's value_and_grad from a .ml script at T x D, H heads (hidden 4D)."""
    import handblock
    import bench
    rng = np.random.default_rng(0)
    W = handblock.make_weights(D, H, 4 * D, rng, np.float64)
    x = rng.standard_normal((T, D))
    R = rng.standard_normal((T, D))
    step, _ = bench.tapeml_setup(W, x, R)
    return step


def _block8():
    return _block(8, 16, 2)


def _hand8():
    import handblock
    rng = np.random.default_rng(0)
    W = handblock.make_weights(16, 2, 64, rng, np.float64)
    x = rng.standard_normal((8, 16))
    R = rng.standard_normal((8, 16))
    return lambda: handblock.block_fwd_bwd(x, W, R)


def _block128():
    """T=128, D=256 (8 heads): the matrix products' share is large, the interpreter's and the
    tape's small."""
    return _block(128, 256, 8)


def _minigpt():
    """One training step of examples/minigpt.ml's model (bench.MINIGPT_STEP)."""
    import bench
    return bench.ml_bench(bench.MINIGPT_STEP)


def _encdec():
    """One training step of examples/encoder_decoder.ml's model (bench.ENCDEC_STEP)."""
    import bench
    return bench.ml_bench(bench.ENCDEC_STEP)


def _builtin_loop(call):
    """A .ml loop of N_OPS builtin calls (minus the same loop without the call: the call's cost)."""
    return lambda: _ml(f"""
        x = [1, 2; 3, 4]
        fn bench()
          y = 0
          for i in 1:{N_OPS}
            y = {call}
          end
          return y
        end
        """)


CASES = {
    "mul_grad": (_loop("*", True), 3),
    "mul_plain": (_loop("*", False), 3),
    "add_grad": (_loop("+", True), 3),
    "add_plain": (_loop("+", False), 3),
    "py_mul_grad": (_py_loop("mul", True), 5),
    "py_mul_plain": (_py_loop("mul", False), 5),
    "py_add_grad": (_py_loop("add", True), 5),
    "py_add_plain": (_py_loop("add", False), 5),
    "block8": (_block8, 100),
    "block128": (_block128, 5),
    "minigpt_step": (_minigpt, 3),
    "encdec_step": (_encdec, 10),
    "hand8": (_hand8, 300),
    "call_sum": (_builtin_loop("sum(x)"), 3),
    "call_sum_kw": (_builtin_loop("sum(x, dim = 1)"), 3),
    "call_size": (_builtin_loop("size(x, 1)"), 3),
    "call_none": (_builtin_loop("x"), 3),
}
DERIVED = {
    "tape share, mul (per op)": ("mul_grad", "mul_plain", N_OPS),
    "tape share, add (per op)": ("add_grad", "add_plain", N_OPS),
    "tape share, mul, Python loop (per op)": ("py_mul_grad", "py_mul_plain", N_OPS),
    "tape share, add, Python loop (per op)": ("py_add_grad", "py_add_plain", N_OPS),
    "sum(x) call (per call)": ("call_sum", "call_none", N_OPS),
    "sum(x, dim = 1) call (per call)": ("call_sum_kw", "call_none", N_OPS),
    "size(x, 1) call (per call)": ("call_size", "call_none", N_OPS),
}
