"""Resources the size guard did not see (issue 25, item 6): loops that made their whole range
first, walks over deeply nested values, builtins that reached NumPy's allocator with a huge count,
and jacobians of many outputs. Memory is measured (tracemalloc in process; an address-space limit
in a subprocess for the risky ones), never time."""
from __future__ import annotations

import io
import subprocess
import sys
from textwrap import dedent

import numpy as np
import pytest

from fd import fd_jacobian
from conftest import slow_after
from support import allocates_at_most, error_of, fresh, output_of, run

from tapeml.syntax.errors import LangError, TypeErr, ValueErr
from tapeml.array.ops import set_dtype


def run_limited(source: str, tmp_path, address_space_gb: float = 2.0, timeout: float = 300):
    """Run `tapeml prog.ml` in a subprocess whose address space is capped: a program that asks
    for more memory fails there (MemoryError) instead of filling the machine."""
    path = tmp_path / "prog.ml"
    path.write_text(dedent(source), encoding="utf-8")
    limit = int(address_space_gb * 1024 ** 3)
    setup = ("import resource, sys; resource.setrlimit(resource.RLIMIT_AS, (%d, %d)); "
             "from tapeml.faces.cli import entry; sys.argv = ['tapeml', 'prog.ml']; entry()" % (limit, limit))
    return subprocess.run([sys.executable, "-c", setup], capture_output=True, text=True, timeout=timeout,
                          cwd=tmp_path, env={"TAPEML_PROGRESS": "0", "PATH": "/usr/bin:/bin",
                                             "OPENBLAS_NUM_THREADS": "1"})


# ---- loops walk ranges and vectors a chunk at a time --------------------------------------------
@pytest.mark.parametrize("iterable, first", [
    ("1:1e8", "1"),
    ("0:-1:-99999999", "0"),
    ("range(1e8)", "0"),
    ("progress(1:1e8)", "1"),
    ("progress(1:1e8, desc=\"train\")", "1"),
    ("enumerate(1:1e8)", "(0, 1)"),
    ("progress(enumerate(range(1e8)))", "(0, 0)"),
    ("zip(1:1e8, range(1e8))", "(1, 0)"),
    ("enumerate(zip(1:1e8, 2:1e8 + 1))", "(0, (1, 2))"),
])
def test_a_loop_over_1e8_with_a_break_makes_nothing_1e8_long(iterable, first):
    with allocates_at_most(5e6):
        out = output_of(f"for item in {iterable}\n    print(item)\n    break\nend\n")
    assert out == first + "\n"


def test_a_loop_over_an_existing_vector_makes_no_list_of_it():
    interp = run("v = zeros(1e7)\nm = zeros(1e6, 2)\ns = \"ab\" * 1e6")
    with allocates_at_most(5e6):
        out = output_of(dedent("""
            for x in v
                print(x)
                break
            end
            for row in m
                print(row)
                break
            end
            for c in s
                print(c)
                break
            end
            for i, x in enumerate(v)
                print(i, x)
                break
            end
        """), interp)
    assert out == "0\n[0, 0]\na\n0 0\n"


def test_1e8_steps_in_a_subprocess_with_2_gb(tmp_path):
    # the whole range as a Python list was 1e8 floats (3.2 GB) before the first step
    proc = run_limited("""
        n = 0
        for i in progress(1:1e8)
            n += 1
            if i == 3
                break
            end
        end
        for i, x in enumerate(range(1e8))
            if i == 2
                break
            end
        end
        print(n, i, x)
    """, tmp_path)
    assert (proc.returncode, proc.stdout, proc.stderr) == (0, "3 2 2\n", "")


@pytest.mark.parametrize("rng", ["0:0.1:1000.3", "1:9000", "5:-0.7:-6000", "0:1e-3:9.999", "1:1"])
@pytest.mark.parametrize("dtype", ["float64", "float32"])
def test_a_walked_range_visits_the_elements_of_the_range_value(rng, dtype):
    # the loop's items are the vector's elements (value semantics), across chunk boundaries, with
    # the end snapped onto b; NumPy's arange gives the elements to within rounding
    set_dtype(dtype)
    out = output_of(dedent(f"""
        r = {rng}
        k = 0
        same = true
        for x in {rng}
            same = same and x == r[k] and dtype(r) == "{dtype}"
            k += 1
        end
        print(same, k == len(r))
    """))
    assert out == "true true\n"
    a, s, b = (float(p) for p in (rng.split(":") if rng.count(":") == 2 else [rng.split(":")[0], 1,
                                                                                 rng.split(":")[1]]))
    ref = np.arange(a, b + s * 1e-6, s)
    interp = run(f"r = {rng}")
    got = interp.globals.vars["r"]
    assert got.shape == ref.shape
    np.testing.assert_allclose(got, ref, rtol=1e-6 if dtype == "float32" else 1e-12, atol=1e-9)


def test_a_tracked_range_carries_gradients_across_chunks():
    # sum over v = a + k (k = 0 .. 9999) of v^2; d/da = 2 * sum(v) = 2 * (10000 a + 49995000)
    out = output_of(dedent("""
        fn f(a)
            t = 0
            for v in a:a + 9999
                t = t + v * v
            end
            return t
        end
        print(grad(f, 1.5))
        fn g(s)
            t = 0
            for v in progress(0:s:9999 * s)
                t = t + v
            end
            return t
        end
        print(grad(g, 2))
    """))
    assert out == f"{2 * (10000 * 1.5 + 49995000):.0f}\n{49995000}\n"


def test_walked_builtins_keep_their_errors_and_limits():
    err = error_of("for i in 1:1e9\nend")
    assert isinstance(err, ValueErr) and "the range would have 1000000000 elements; the limit is 100000000" \
        in err.message and (err.span.line, err.span.col) == (1, 10)
    err = error_of("for i in range(2e8)\nend")
    assert "range(): the range would have 200000000 elements" in err.message
    err = error_of("for p in enumerate({a = 1})\nend")
    assert isinstance(err, TypeErr) and err.message.startswith("enumerate(): xs must be a tuple")
    assert (err.span.line, err.span.col) == (1, 10)
    err = error_of("for a, b in zip(1:3, 1:4)\nend")
    assert err.message == "zip(): argument 0 has 3 items and argument 1 has 4; zip needs equal lengths"
    err = error_of("for x in progress(none)\nend")
    assert isinstance(err, TypeErr) and err.message.startswith("progress(): cannot loop over none")
    err = error_of("for x in enumerate(progress(1:3))\nend")
    assert isinstance(err, TypeErr) and "got a progress(...) loop" in err.message
    err = error_of("for x in zip()\nend")
    assert err.message == "zip() needs at least one sequence"


def test_ranges_stay_values_and_shadowed_names_are_plain_calls():
    out = output_of(dedent("""
        r = 2:4
        print(r, r[1], r * 2, sum(1:100), len(range(5)), enumerate(1:2), zip(1:2, "ab"))
        fn enumerate(x)
            return (x, x)
        end
        for v in enumerate(1:2)
            print(v)
        end
        p = progress(1:3)
        for i in p
            print(i)
        end
    """))
    assert out == ("[2, 3, 4] 3 [4, 6, 8] 5050 5 ((0, 1), (1, 2)) ((1, \"a\"), (2, \"b\"))\n"
                   "[1, 2]\n[1, 2]\n1\n2\n3\n")


# ---- walks over values follow tuples and records at most 20000 deep ------------------------------
DEEP = """r = {{a = 1}}
for i in 1:{n}
    r = {{a = r}}
end
x = {expr}
print("done")
"""


@pytest.mark.parametrize("expr, col, message", slow_after(4, [     # one of each kind of walk, then the rest
    ("tree_map(fn(x) -> x * 2, r)", 5, "tree_map(): the tree nests tuples and records more than 20000 deep"),
    ("print(r)", 5, "the value to print nests tuples and records more than 20000 deep"),
    ("r == r", 7, "a value compared nests tuples and records more than 20000 deep"),
    ("grad(fn(p) -> 1, r)", 5, "grad(): r nests tuples and records more than 20000 deep"),
    ("tree_map(fn(x, y) -> x + y, r, r)", 5, "tree_map(): the tree nests"),
    ("str(r)", 5, "the value to print nests"),
    ('"r is {r}"', 5, "the value to print nests"),
    ("(r, 1) != (r, 2)", 12, "a value compared nests"),
    ("contains((1, r), r)", 5, "a value compared nests"),
    ("tree_leaves(r)", 5, "tree_leaves(): tree nests tuples and records more than 20000 deep"),
    ("param_count(r)", 5, "param_count(): the value nests"),
    ("summary(r)", 5, "summary(): weights nests"),
    ("value_and_grad(fn(p) -> 1, r)", 5, "value_and_grad(): r nests"),
    ("check_grad(fn(p) -> 1, r)", 5, "check_grad(): r nests"),
    ("stop_gradient(r)", 5, "stop_gradient(): x nests"),
]))
def test_a_walk_past_the_nesting_limit_is_a_value_error_at_its_call(tmp_path, expr, col, message):
    n = 100_000 if expr.startswith("tree_map(fn(x) ->") else 20_001
    proc = run_limited(DEEP.format(n=n, expr=expr), tmp_path)
    assert proc.returncode == 1 and proc.stdout == "", proc.stderr[-2000:]
    first = proc.stderr.splitlines()[0]
    assert first.startswith(f"prog.ml:5:{col}: ValueError: {message}"), first
    assert "Traceback" not in proc.stderr and "InternalError" not in proc.stderr


def test_values_20000_deep_are_walked(tmp_path):
    # 20000 records inside each other (the limit) print, compare, map, differentiate and count
    proc = run_limited("""
        r = {a = 1}
        for i in 1:19999
            r = {a = r}
        end
        s = str(r)
        print(len(s), s[0:9], s[len(s) - 5:end])
        print(r == r, r == tree_map(fn(x) -> x, r), r == tree_map(fn(x) -> x + 1, r))
        print(grad(fn(p) -> 3 * tree_leaves(p)[0], r) == tree_map(fn(x) -> 3, r))
        print(param_count(r), len(tree_leaves(r)), "{r}" == s)
    """, tmp_path)
    # the printed record is 20000 '{a = ', the 1, then 20000 '}'
    assert (proc.returncode, proc.stderr) == (0, "")
    assert proc.stdout == f"{20000 * 5 + 1 + 20000} {{a = {{a =  }}}}}}}}}}\ntrue true false\ntrue\n1 1 true\n"


def test_the_display_shows_a_deep_record_briefly_and_refuses_past_the_limit(tmp_path):
    script = dedent("""
        import sys
        sys.setrecursionlimit(200000)
        from tapeml.array.display import display_value
        from tapeml.array.values import Record
        from tapeml.syntax.errors import LangError
        v = (1.0,)
        for i in range(19999):
            v = Record({"a": v, "b": 2.0})
        lines = display_value(v, 60, 20).splitlines()
        print(len(lines), lines[0], max(len(l) for l in lines), lines[-1])
        try:
            display_value((v,), 60, 20)
        except LangError as e:
            print(e.message)
    """)
    proc = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-2000:]
    # 20000 numbers in 19999 records: two rows (a, b) for each record inside the top one, but the
    # two innermost fit on one row each ("{a = (1,), b = 2}" and the record around it): 39998 - 4
    # rows; 15 are shown (height 20 - 4, less the last line), then the count of the rest
    assert proc.stdout == ("17 record with 2 fields, 20,000 numbers: 60   ⋮ 39979 more lines\n"
                           "the value to print nests tuples and records more than 20000 deep\n")


# ---- counts and sizes are checked before NumPy allocates ------------------------------------------
def _limit_text():
    from tapeml.array.limits import MAX_ELEMENTS, g3
    return g3(MAX_ELEMENTS)


@pytest.mark.parametrize("source, message", [
    ("diag([1, 2], 2^53)", "diag() of a vector of length 2 on diagonal 9007199254740992 (a 9007199254740994x"
                           "9007199254740994 matrix) would need 6.49e23 GB of float64; the limit is"),
    ("diag([1], -1e5)", "diag() of a vector of length 1 on diagonal -100000 (a 100001x100001 matrix) would "
                        "need 80 GB of float64"),
    ("diag([1, 2], 6e4)", "diag() of a vector of length 2 on diagonal 60000 (a 60002x60002 matrix) would need 28.8 GB"),
    ("tile([], 1e300)", "tile(): each rep must be a whole number between 0 and 2^53, got 1e300"),
    ("tile([1, 2], 1e10)", "tile() of a vector of length 2 (a result of a vector of length 20000000000) would need 160 GB of float64"),
    ("tile([1, 2], 2, 1e300)", "tile(): each rep must be a whole number between 0 and 2^53, got 1e300"),
    ("repeat([1, 2], 1e10)", "repeat() of a vector of length 2 (a result of a vector of length 20000000000) would need 160 GB of float64"),
    ("repeat([], 1e300)", "repeat(): n must be a whole number between -2^53 and 2^53, got 1e300"),
    ("pad(zeros(0, 3), ((0, 0), (1e10, 0)))", "pad() of 0x3 (a result of 0x10000000003): a size of 10000000003 is past the limit of {limit} elements"),
    ("pad(zeros(0, 3), ((0, 0), (1e300, 0)))", "pad(): widths must be whole numbers between 0 and 2^53, got 1e300"),
    ("pad([1], (1e10, 0))", "pad() of a vector of length 1 (a result of a vector of length 10000000001) would need 80 GB of float64"),
    ("reshape(zeros(0), 0, 1e10)", "reshape(): a size of 10000000000 is past the limit of {limit} elements"),
    ("reshape(zeros(0), -1, 1e10)", "reshape(): a size of 10000000000 is past the limit of {limit} elements"),
    ("reshape(zeros(0), 1e300, 0)", "reshape(): sizes must be whole numbers between -1 and 2^53, got 1e300"),
    ("chunk(zeros(0), 2^53)", "chunk() of an empty axis into 9007199254740992 parts (a tuple of "
                              "9007199254740992) would need 72100000 GB of float64"),
    ("one_hot(zeros(0), 2e9)", "one_hot() of 0 ids into 2000000000 classes: a size of 2000000000 is past the "
                               "limit of {limit} elements"),
    ("one_hot([1], 1e10)", "one_hot() of 1 ids into 10000000000 classes would need 80 GB"),
    ("sinusoidal_positions(0, 2e9)", "sinusoidal_positions(0, 2000000000): a size of 2000000000 is past the limit"),
    ("transformer_block_init(15000, 1)", "transformer_block_init(15000, 1, mlp_ratio=4): its 2700000000 numbers "
                                         "would need 21.6 GB of float64"),
    ("transformer_decoder_block_init(10000, 1)", "transformer_decoder_block_init(10000, 1, mlp_ratio=4): its "
                                                 "1600000000 numbers would need 12.8 GB"),
    ("zeros(0, 2e9)", "zeros(0, 2000000000): a size of 2000000000 is past the limit of {limit} elements"),
    ("eye(2^53)", "eye(9007199254740992, 9007199254740992) would need 6.49e23 GB"),
    ("fill(1, 1e10)", "fill(10000000000) would need 80 GB"),
    ("rand(1e10)", "rand(10000000000) would need 80 GB"),
    ("randn(1e5, 1e5)", "randn(100000, 100000) would need 80 GB"),
    ("randperm(1e10)", "randperm(10000000000) would need 80 GB"),
    ("linspace(0, 1, 2^53)", "linspace(9007199254740992) would need 72100000 GB"),
    ("kron(ones(1e5), ones(1e5))", "kron() of a vector of length 100000 and a vector of length 100000 (a result of a vector of length 10000000000) would need 80 GB"),
    ('"ab" * 1e10', "the repeated string would take 20 GB; the limit is 0.1 GB"),
    ("range(1e10)", "range(): the range would have 10000000000 elements; the limit is 100000000"),
])
def test_a_huge_count_is_the_limits_error_before_allocating(source, message):
    with allocates_at_most(50e6):
        err = error_of(f"x = 1\ny = {source}\n")
    assert isinstance(err, ValueErr), err
    assert err.message.startswith(message.format(limit=_limit_text())), err.message
    assert err.span.line == 2 and err.span.col >= 5


@pytest.mark.parametrize("source, reference", [
    ("tile(zeros(0), 1e10)", lambda: np.tile(np.zeros(0), 10 ** 10)),
    ("tile(zeros(0, 2), 1e9, 1)", lambda: np.tile(np.zeros((0, 2)), (10 ** 9, 1))),
    ("repeat(zeros(0), 2e9)", lambda: np.repeat(np.zeros(0), 2 * 10 ** 9)),
    ("repeat(zeros(2, 0), 2e9, dim=1)", lambda: np.repeat(np.zeros((2, 0)), 2 * 10 ** 9, axis=1)),
    # NumPy takes the offset as a C int; past it, the diagonal is as empty as at 2^31 - 1
    ("diag(ones(2, 2), 2^31 - 1)", lambda: np.diag(np.ones((2, 2)), 2 ** 31 - 1)),
    ("diag(ones(2, 2), 2^53)", lambda: np.diag(np.ones((2, 2)), 2 ** 31 - 1)),
    ("diag(ones(2, 3), -2^53)", lambda: np.diag(np.ones((2, 3)), -(2 ** 31 - 1))),   # NumPy 2.4 crashes at -2^31
    ("diag([1, 2], 3)", lambda: np.diag([1.0, 2.0], 3)),
])
def test_huge_counts_of_nothing_give_what_numpy_gives(source, reference):
    # a count that NumPy takes (within int64) on an empty input is an empty result, as NumPy's
    interp = fresh()
    with allocates_at_most(5e6):
        run(f"y = {source}", interp)
    got, ref = interp.globals.vars["y"], reference()
    assert got.shape == ref.shape and np.array_equal(got, ref)


def test_chunk_of_an_empty_axis_gives_n_empty_parts_and_their_gradient():
    out = output_of(dedent("""
        p = chunk(zeros(2, 0), 3, dim=1)
        print(len(p), size(p[2]))
        print(grad(fn(x) -> sum(x) + sum(chunk(x[0:len(x)-3], 4)[3]), [1, 2]))    # an empty part
    """))
    assert out == "3 (2, 0)\n[1, 1]\n"


# ---- jacobian: the cheaper loop of backward passes, and a bar when it is long -----------------------
def _tapeml_fn(interp, name):
    """A tapeml function of the interpreter as a Python function of NumPy values."""
    f = interp.globals.vars[name]
    return lambda x: np.asarray(interp.call(f, [x], {}, None), dtype=np.float64)


def test_a_tall_jacobian_takes_one_pass_per_input_and_agrees_with_finite_differences(monkeypatch):
    from tapeml.builtins import autodiff
    passes = []
    real = autodiff.backward
    monkeypatch.setattr(autodiff, "backward", lambda *a, **k: passes.append(1) or real(*a, **k))
    interp = run(dedent("""
        W = reshape(sin(1:30), 5, 3, 2)
        fn tall(x)
            return tanh(W[:, :, 0] * x[0] + W[:, :, 1] * x[1] ^ 2)
        end
        fn wide(x)
            return [sum(x ^ 2), prod(x)]
        end
        fn scalar_in(t)
            return [sin(t), t ^ 3, 2 * t, exp(t)]
        end
        fn constant(x)
            return ones(4, 2)
        end
        J = jacobian(tall, [0.4, -1.3])
        Jw = jacobian(wide, [1, 2, 3])
        Js = jacobian(scalar_in, 0.5)
        Jc = jacobian(constant, [1, 2])
    """))
    v = interp.globals.vars
    # tall: 15 outputs, 2 inputs: u'J recorded once, then one pass per input (3), not 15
    # wide: 2 outputs, 3 inputs: one pass per output (2); scalar_in: 1 + 1; constant: none
    assert len(passes) == 3 + 2 + 2
    assert v["J"].shape == (5, 3, 2) and v["Js"].shape == (4,) and v["Jc"].shape == (4, 2, 2)
    np.testing.assert_allclose(v["J"], fd_jacobian(_tapeml_fn(interp, "tall"), [0.4, -1.3]), rtol=1e-7, atol=1e-9)
    np.testing.assert_allclose(v["Jw"], fd_jacobian(_tapeml_fn(interp, "wide"), [1.0, 2.0, 3.0]), rtol=1e-7)
    np.testing.assert_allclose(v["Js"], [np.cos(0.5), 3 * 0.25, 2.0, np.exp(0.5)], rtol=1e-15)
    assert not v["Jc"].any()


def test_grad_flows_through_a_tall_jacobian():
    interp = run(dedent("""
        fn tall(x)
            return [sin(x[0] * x[1]), x[0] ^ 3, x[1] * x[0], exp(x[1]), x[0]]
        end
        fn loss(x)
            return sum(jacobian(tall, x) * [1, 2; 3, 4; 5, 6; 7, 8; 9, 10])
        end
        g = grad(loss, [0.3, 0.8])
        gv = grad(fn(x) -> sum(jacobian(fn(t) -> [t, t ^ 2, sin(t)], x)), 0.7)
    """))
    loss = interp.globals.vars["loss"]
    ref = fd_jacobian(lambda x: np.float64(interp.call(loss, [x], {}, None)), [0.3, 0.8], h=1e-5)
    np.testing.assert_allclose(interp.globals.vars["g"], ref, rtol=1e-6)
    assert interp.globals.vars["gv"] == pytest.approx(2 - np.sin(0.7), rel=1e-14)


def test_a_long_jacobian_shows_a_bar_and_a_short_one_says_nothing(monkeypatch):
    from tapeml.evaluator import progress
    interp = fresh()
    err = io.StringIO()
    interp.progress_out = err
    run("J = jacobian(fn(x) -> sin(x), [1, 2, 3])\nH = hessian(fn(x) -> sum(x ^ 3), [1, 2])", interp)
    assert err.getvalue() == ""                   # done within WORK_DELAY seconds: no bar
    monkeypatch.setattr(progress, "WORK_DELAY", 1e-9)
    run("J = jacobian(fn(x) -> sin(x), 1:40)\nH = hessian(fn(x) -> sum(x ^ 3), [1, 2])\n"
        "c = check_grad(fn(x) -> sum(x ^ 2), 1:5)", interp)
    lines = err.getvalue().splitlines()
    # log lines (the stream is not a terminal): the first step, each tenth, the end
    assert lines[0].startswith("jacobian, 40 backward passes:   2% 1/40 [")
    for title, count in (("jacobian, 40 backward passes", "40/40"), ("hessian, 2 backward passes", "2/2"),
                         ("check_grad, 5 elements", "5/5")):
        last = [line for line in lines if line.startswith(title + ":")][-1]
        assert f"100% {count} [" in last, lines
    assert len(lines) == (1 + 10) + 2 + 5      # jacobian: 1/40, then 4/40 ... 40/40; each step of 2 and of 5
    np.testing.assert_allclose(interp.globals.vars["J"], np.diag(np.cos(np.arange(1.0, 41.0))), rtol=1e-15)
