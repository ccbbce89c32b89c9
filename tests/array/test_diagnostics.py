"""Issue 30: NaN hunting by source line (check_nan), the profiler that splits each line into
forward and backward, and show_tape's picture of the tape; all three off by default and gone
(no hook left anywhere) once turned off."""
import io
import json
import os
import time

import numpy as np
import pytest

from support import ROOT, run_cli
import tapeml
from tapeml.array import diagnostics, tape
from tapeml.array.profile_report import Report
from tapeml.builtins import tapeview
from tapeml.evaluator import instrument, semantics
from tapeml.evaluator.interpreter import Interpreter
from tapeml.syntax import ast as A
from tapeml.syntax.errors import LangError, render


def checked_run(source, name="t.ml", check=True):
    interp = Interpreter(out=io.StringIO())
    interp.set_diagnostics(check_nan=check)
    try:
        interp.run(source, name)
    except LangError as e:
        return interp, e, render(e, interp.sources)
    return interp, None, None


# ---- check_nan ---------------------------------------------------------------------------------
def test_a_nan_made_in_the_forward_stops_at_its_operator():
    _, e, text = checked_run("\nx = [1, 2, 3]\nz = x - 2\ny = z / (x - 2)\nprint(y)")
    assert e.kind == "NaNError" and (e.line, e.column) == (4, 7)
    assert e.message == ("'/' made NaN from finite operands: the result (a vector of length 3) is nan at [1], "
                         "where the left operand is 0 and the right operand is 0")
    assert text.split("\n")[1:] == ["  4 | y = z / (x - 2)", "    |       ^"]


def test_a_nan_made_by_a_builtin_inside_a_function_names_it_and_the_call_chain():
    _, e, text = checked_run("\nfn f(x)\n  y = log(x)\n  return sum(y)\nend\nprint(f([1, 0, 2]))")
    assert e.kind == "NaNError" and (e.line, e.column) == (3, 7)
    assert e.message == ("log made -inf from finite arguments: the result (a vector of length 3) is -inf at [1], "
                         "where x is 0")
    assert "called from t.ml:6:7 in f" in text


def test_a_nan_made_only_in_the_backward_names_the_forward_line_and_the_grad():
    src = "\nfn f(x)\n  r = sqrt(x)\n  return sum(r)\nend\nx = [0, 1, 4]\nprint(f(x))\ng = grad(f, x)"
    interp, e, text = checked_run(src)
    assert interp.out.getvalue() == "3\n"          # the forward pass was fine: sqrt(0) = 0
    assert e.kind == "NaNError" and (e.line, e.column) == (3, 7)     # the line that recorded sqrt
    assert e.message.startswith("the backward pass of sqrt made inf from finite values: the gradient "
                                "for its argument (a vector of length 3) is inf at [0], where the incoming "
                                "gradient is 1, the forward result is 0 and the argument is 0")
    assert e.message.endswith("this line recorded sqrt in the forward pass; grad at t.ml:8:5 ran the backward pass")
    assert text.split("\n")[1:3] == ["  3 |   r = sqrt(x)", "    |       ^^^^^^^"]


def test_a_backward_report_names_the_arguments_of_the_primitive():
    """Primitives with several arguments name them (dense's x, w, b; the joined heads' matrices by
    head), not 'argument 2'."""
    src = "x = [1e200, 1e200; 1, 2]\ng = grad(fn(w) -> sum(dense(x, w) * 1e150), [1e-200; 1e-200])"
    _, e, _ = checked_run(src)
    assert e.message.startswith("the backward pass of dense made inf from finite values: the gradient for w (2x1) "
                                "is inf at [0, 0], where the incoming gradient is 1e150, the forward result is 2 "
                                "and w is 1e-200")
    from tapeml.array import ops
    from tapeml.array.diagnostics import argument_names
    heads = ops.TABLE["dense_heads"]
    assert argument_names(heads, (0, 1, 2, 3, 4), {"bias": True}) == [
        "x", "head 1's projection matrix", "head 2's projection matrix", "head 1's projection bias",
        "head 2's projection bias"]
    assert argument_names(ops.TABLE["heads_dense"], (0, 1, 2), {}) == ["the heads' outputs", "head 1's wo", "head 2's wo"]
    assert argument_names(ops.TABLE["pow"], (0, 1), {}) == ["the base", "the exponent"]
    assert argument_names(ops.TABLE["concat"], (0, 1), {}) == ["argument 1", "argument 2"]
    assert argument_names(ops.TABLE["sqrt"], (0,), {}) == ["the argument"]


def test_a_bad_cotangent_that_a_later_vjp_takes_away_is_not_flagged():
    """The gradient of sqrt(sum(v^2)) at v = 0 is 0 (a zero factor wins in every VJP): sqrt's VJP
    makes inf, pow's takes it away. The error names the VJP whose inf reached the gradient."""
    src = ("\nfn norm2(v) -> sqrt(sum(v^2))\nprint(grad(fn(w) -> norm2(w - [1, 2]), [1, 2]))\n"
           "x = [0, 1, 4]\nprint(grad(fn(x) -> sum(where(x > 0, sqrt(x), 0)), x))\n"
           "g = grad(fn(x) -> norm2(x - x) + sum(sqrt(x)), x)")
    interp, e, _ = checked_run(src)
    assert interp.out.getvalue() == "[0, 0]\n[0, 0.5, 0.25]\n"
    assert (e.line, e.column) == (6, 38) and e.message.startswith("the backward pass of sqrt made inf")


def test_without_the_check_the_same_programs_run_and_give_nan_and_inf():
    out = io.StringIO()
    interp = Interpreter(out=out)
    interp.run("x = [1, 2, 3]\nprint((x - 2) / (x - 2))\nprint(grad(fn(x) -> sum(sqrt(x)), [0, 1]))")
    assert out.getvalue() == "[1, nan, 1]\n[inf, 0.5]\n"


@pytest.mark.parametrize("src", [
    "y = 0 / 0",                                 # written on purpose
    "y = -1 / 0",
    "y = log(0)",
    "y = [1, 0 / 0, 3]",
    "m = 0 / 0\ny = m + 1\nz = [1, 2] * m",      # a NaN passed along is not flagged again
    "a = 2\ny = a / 0",                          # a name, not literals only: flagged
])
def test_nans_written_on_purpose_are_not_flagged(src):
    _, e, _ = checked_run(src)
    if src.startswith("a = 2"):
        assert e is not None and e.kind == "NaNError"
    else:
        assert e is None


def test_a_fully_masked_attention_row_is_not_flagged_forward_or_backward():
    src = """
q = [1, 2; 3, 4; 5, 6]
m = [true, true, false; false, false, false; true, false, true]
fn f(q) -> sum(scaled_dot_product_attention(q, q, q, mask = m) * [1, 2; 3, 4; 5, 6])
print(scaled_dot_product_attention(q, q, q, mask = m)[1, :])
g = grad(f, q)
s = q @ q'
fn g2(s) -> sum(softmax(where(m, s, -1 / 0)) * [1, 2, 3; 4, 5, 6; 7, 8, 9])
print(grad(g2, s)[1, :])
"""
    interp, e, text = checked_run(src)
    assert e is None, text
    assert interp.out.getvalue().split("\n")[:2] == ["[0, 0]", "[0, 0, 0]"]


def test_an_infinity_turned_into_nan_is_flagged_with_the_input_already_non_finite():
    _, e, _ = checked_run("\na = [1, -1 / 0]\nb = a - a")
    assert (e.line, e.column) == (3, 7)
    assert e.message == ("'-' made NaN from operands with infinities but no NaN: the result (a vector of length 2) "
                         "is nan at [1], where the left operand is -inf (already infinite) and the right operand is "
                         "-inf (already infinite)")


def test_an_overflow_of_plain_numbers_is_flagged():
    _, e, _ = checked_run("\nx = 1e300\ny = x * x")
    assert e.message.startswith("'*' made inf from finite operands: the result is inf, where the left operand is 1e300")


def test_check_nan_builtin_turns_the_check_on_and_off_and_leaves_no_hook():
    interp = Interpreter(out=io.StringIO())
    plain_binary = interp.dispatch[A.Binary]
    interp.run("check_nan(true)")
    assert instrument.attached(interp) and diagnostics.current().check_nan
    assert tape.Box.__init__ is not tape._PLAIN_INIT
    with pytest.raises(LangError) as info:
        interp.run("\nx = [0, 1]\ny = 1 / x")
    assert info.value.kind == "NaNError"
    interp.run("check_nan(false)\ny = 1 / x")
    assert not instrument.attached(interp) and "call" not in vars(interp)
    assert interp.dispatch[A.Binary] == plain_binary
    assert tape.Box.__init__ is tape._PLAIN_INIT
    assert all(semantics.BINARY[s] is instrument._PLAIN_BINARY[s] for s in semantics.BINARY)
    assert all(semantics.FLOAT_OPS[s] is instrument._PLAIN_FLOAT_OPS[s] for s in semantics.FLOAT_OPS)


def test_values_and_gradients_are_the_same_with_the_modes_on():
    src = """
seed(3)
w = transformer_block_init(8, 2)
x = randn(5, 8)
loss, g = value_and_grad(fn(w) -> sum(transformer_block(x, w, causal = true)^2), w)
h = grad(fn(x) -> grad(fn(y) -> sum(y^3 * x), x)[0], [1, 2])
"""
    results = []
    for modes in ({}, {"check_nan": True}, {"profiler": diagnostics.Profiler()}):
        interp = Interpreter()
        interp.set_diagnostics(**modes)
        interp.run(src)
        results.append((interp.get_variable("loss"), interp.get_variable("g").fields["w1"],
                        interp.get_variable("h")))
        interp.set_diagnostics(check_nan=False, profiler=None)
    for loss, w1, h in results[1:]:
        assert loss == results[0][0] and np.array_equal(w1, results[0][1]) and np.array_equal(h, results[0][2])


def test_command_line_and_session_check_nan():
    code, out = run_cli(["--check-nan", "-c", "\nx = [4, 0]\ny = grad(fn(x) -> sum(sqrt(x)), x)"])
    assert code == 1 and out.startswith("<string>:3:23: NaNError: the backward pass of sqrt made inf")
    Interpreter(load_prelude=False).set_diagnostics(check_nan=False)     # (run_cli runs in this process)
    assert run_cli(["-c", "x = [0]\nprint(1 / x)"]) == (0, "[inf]\n")
    s = tapeml.Session(check_nan=True, out=io.StringIO())
    assert s.check_nan
    with pytest.raises(tapeml.LangError) as info:
        s.run("x = [1, 0]\ny = log(x)")
    assert info.value.kind == "NaNError" and info.value.line == 2
    s.check_nan = False
    s.run("y = log(x)")
    assert tapeml.Session().check_nan is False


# ---- the profiler ------------------------------------------------------------------------------
HEAVY = """x = {a = randn(300, 300), b = randn(300, 300)}
fn f(p) -> sum(p.a @ p.b)
for i in 1:3
  g = grad(f, x)
end
"""


def profile_of(source, clock=time.thread_time):
    interp = Interpreter(out=io.StringIO())
    prof = diagnostics.Profiler(clock=clock)
    interp.set_diagnostics(profiler=prof)
    try:
        interp.run(source, "p.ml")
    finally:
        prof.stop()
        interp.set_diagnostics(profiler=None)
    return Report(prof, interp.sources), prof


def test_the_profiler_puts_a_large_matmuls_backward_on_its_line():
    """The product's VJP makes two products of the size of the one in the forward pass, so
    line 2's backward holds the most time, then its forward (the clock is this thread's CPU time:
    neither the machine's load nor BLAS threads spinning after a product move the shares)."""
    line2 = ("p.ml", 2)
    for attempt in range(3):        # CPU-time shares: a run beside another busy process once came out
        report, prof = profile_of(HEAVY)      # the other way round; the rule must hold in one of three
        biggest = max(prof.seconds, key=prof.seconds.get)
        if biggest == (line2, diagnostics.BWD, "operator @"):
            break
    assert biggest == (line2, diagnostics.BWD, "operator @")
    fwd, bwd, runs, nodes = report.lines[line2]
    assert bwd > fwd > 0 and nodes == 6 and runs == 4       # (the fn statement once, its body 3 times)
    assert report.lines[("p.ml", 4)][2] == 3                 # the statement ran 3 times
    assert report.ops["operator @"][2:] == [3, 3] and report.ops["grad"][2] == 3
    assert abs(sum(prof.seconds.values()) - prof.total) < 1e-9
    table = report.table(top=2)
    assert table.split("\n")[4].startswith("  p.ml:2 ")       # the top row


def test_the_table_without_times_is_stable_text():
    report, _ = profile_of(HEAVY.replace("300", "3"))
    assert report.table(times=False) == """\
profile (times left out; rows ranked by the nodes they recorded, then by runs or calls)

by source line (all 4 lines):
  line      runs    forward  share   backward  share    nodes  source
  p.ml:2       4          ·      ·          ·      ·        6  fn f(p) -> sum(p.a @ p.b)
  p.ml:4       3          ·      ·          ·      ·        0  g = grad(f, x)
  p.ml:1       1          ·      ·          ·      ·        0  x = {a = randn(3, 3), b = randn(3, 3)}
  p.ml:3       1          ·      ·          ·      ·        0  for i in 1:3

by builtin and operator (all 5 operations; (tapeml code) is the evaluator's own work):
  operation       calls    forward  share   backward  share    nodes
  operator @          3          ·      ·          ·      ·        3
  sum                 3          ·      ·          ·      ·        3
  grad                3          ·      ·          ·      ·        0
  randn               2          ·      ·          ·      ·        0
  (tapeml code)                  ·      ·          ·      ·        0"""


COUNTED = """fn f(v) -> v * 2 + 1
g = fn(v) -> v - 1
fn h(v)
  return v * 3
end
s = 0
for i in 1:100
  s = s + f(i) + g(i)
end
m = map(fn(x) -> x * 2, [1, 2, 3])
m2 = map(f, [1, 2, 3, 4])
d = grad(fn(w) -> sum(w * w), [1, 2])
d2 = grad(fn(w) -> sum(h(w)), [1, 2])
k = fn(x) -> x
t = tree_map(k, (1, 2, 3))
"""


@pytest.mark.parametrize("compiled", [True, False])
def test_a_one_line_functions_body_counts_a_run_of_its_line_each_time_it_runs(compiled):
    """A line's runs are the statements run on it and the one-line function bodies (`fn f(v) -> ...`,
    lambdas) evaluated there, however the function is called: from a loop, by map, grad or
    tree_map. `fn f` ran once and its body 100 times from line 8 and 4 times by map (it showed
    `runs 1`); the same counts whether the functions were compiled before the profile began."""
    from tapeml.evaluator import compiler
    old = compiler.ENABLED
    compiler.ENABLED = compiled
    try:
        report, _ = profile_of(COUNTED)
    finally:
        compiler.ENABLED = old
    runs = {line: row[2] for (_, line), row in report.lines.items()}
    assert runs == {1: 1 + 100 + 4, 2: 1 + 100, 3: 1, 4: 1, 6: 1, 7: 1, 8: 100, 10: 1 + 3, 11: 1,
                    12: 1 + 1, 13: 1 + 1, 14: 1 + 3, 15: 1}, runs
    assert report.ops["operator *"][2] == 100 + 4 + 3 + 1 + 1 and report.ops["map"][2] == 2


def test_speedscope_file_has_forward_and_backward_frames_under_each_line(tmp_path):
    report, prof = profile_of(HEAVY.replace("300", "20"))
    path = tmp_path / "p.json"
    report.save(str(path))
    data = json.loads(path.read_text())
    assert data["$schema"] == "https://www.speedscope.app/file-format-schema.json"
    frames = [f["name"] for f in data["shared"]["frames"]]
    p = data["profiles"][0]
    assert p["type"] == "sampled" and p["unit"] == "seconds" and len(p["samples"]) == len(p["weights"])
    stacks = {tuple(frames[i] for i in s) for s in p["samples"]}
    assert ("p.ml:2 fn f(p) -> sum(p.a @ p.b)", "forward", "operator @") in stacks
    assert ("p.ml:2 fn f(p) -> sum(p.a @ p.b)", "backward", "operator @") in stacks
    assert abs(sum(p["weights"]) - prof.total) < 1e-6


def test_profile_from_the_command_line(tmp_path):
    script = tmp_path / "h.ml"
    script.write_text(HEAVY.replace("300", "30"))
    out = tmp_path / "h.json"
    code, text = run_cli(["--profile-top", "2", "--profile-out", str(out), str(script)])
    assert code == 0
    lines = text.split("\n")
    assert lines[0].startswith("profile: ") and "not on a line" in lines[0]
    assert lines[2] == "by source line (top 2 of 4 lines):"
    assert f"profile written to {out}" in text and json.loads(out.read_text())["exporter"] == "tapeml"
    # a program that does not parse ran nothing: its error alone, no table, no file
    code, text = run_cli(["--profile-out", str(tmp_path / "none.json"), "-c", "1 +"])
    assert code == 1 and "SyntaxError" in text and "profile" not in text and not (tmp_path / "none.json").exists()
    for bad, why in ((["--profile-top", "0"], "--profile-top needs a whole number"),
                     (["--profile-out"], "--profile-out needs a file name"),
                     # a folder that is not there is refused before the program runs, not after it
                     (["--profile-out", "/no/such/folder/p.json", "-c", 'print("ran")'],
                      "--profile-out: no folder '/no/such/folder' to write the profile in")):
        code, text = run_cli(bad)
        assert code == 2 and why in text and "ran" not in text


def test_profile_in_the_repl_and_the_session():
    from tapeml.faces import repl as R
    buf = io.StringIO()
    interp = Interpreter(out=buf)
    repl = R.Repl(interp, None, out=buf, err=buf)
    repl.handle(":profile sum([1, 2] @ [3; 4])")
    text = buf.getvalue()
    assert text.startswith("11\nprofile: ") and "  operator @ " in text
    repl.handle(":profile")
    assert ":profile needs the code to run" in buf.getvalue()
    # code that does not parse ran nothing: its error, and no table of nothing
    buf.seek(0), buf.truncate()
    repl.handle(":profile 1 +")
    assert "SyntaxError" in buf.getvalue() and "profile:" not in buf.getvalue()
    # code that fails while running: its error, then the table of what ran until then
    buf.seek(0), buf.truncate()
    repl.handle(":profile sum([1, 2] @ [3; 4]) + [1, 2] @ [1, 2, 3]")
    text = buf.getvalue()
    assert "ShapeError" in text and "profile: " in text and text.index("ShapeError") < text.index("profile: ")
    assert not instrument.attached(interp)
    s = tapeml.Session(out=io.StringIO())
    with s.profile() as p:
        s.run("y = grad(fn(w) -> sum(w @ w), [1, 2; 3, 4])")
    assert "by source line (all 1 line):" in p.table(times=False)
    assert "<tapeml profile of" in repr(p)


# ---- show_tape -----------------------------------------------------------------------------
def graph_of(defs, f, x, root="x"):
    interp = Interpreter(out=io.StringIO())
    interp.run(defs, "g.ml")
    return interp, tapeview.record(interp.context, interp.get_variable(f), x, root)


def test_the_tape_of_a_two_op_function_has_exactly_its_nodes_and_edges():
    _, g = graph_of("\nfn f(x) -> sum(x * 2)", "f", np.array([1.0, 2.0, 3.0]))
    nodes, edges = g.describe()
    assert nodes == [("x", "input", (3,), None, True), ("mul", "op", (3,), 2, True), ("sum", "op", (), 2, True)]
    assert edges == [("mul", "sum"), ("x", "mul")]
    assert g.recorded == 2 and [n.output for n in g.nodes.values()] == [False, False, True]
    assert tapeview.fold(g).describe() == (nodes, edges)


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_the_node_hook_sees_enough_of_a_block_step_to_replay_it_exactly(dtype):
    """What the hook hands over (each node's primitive, arguments, parents, keywords and saved
    values) is the whole step: replayed without the interpreter (tests/perf/replay.py, the bench's
    floor of a compiled step) it gives the step's value and gradients to the last bit."""
    import sys
    sys.path.insert(0, os.path.join(ROOT, "tests", "perf"))
    import handblock        # (not bench: it sets the process's threads and allocator)
    from replay import check_replay, recorded_replay
    from tapeml.array.values import Record
    rng = np.random.default_rng(0)
    W = handblock.make_weights(16, 2, 64, rng, dtype)
    f = handblock.to_record_fields(W)
    heads = tuple(Record(h) for h in f.pop("heads"))
    interp = Interpreter(out=io.StringIO())
    if dtype == np.float32:
        interp.run('set_dtype("float32")', "<replay>")
    interp.globals.vars.update(w=Record({"heads": heads, **f}), x=rng.standard_normal((8, 16)).astype(dtype),
                               R=rng.standard_normal((8, 16)).astype(dtype))
    interp.run("loss = fn(w) -> sum(transformer_block(x, w) * R)\nfn step() -> value_and_grad(loss, w)", "<replay>")

    def step():
        return interp.call(interp.get_variable("step"), [], {}, None)
    try:
        replay, leaves = recorded_replay(step)
        assert len(leaves) == 16
        check_replay(replay, leaves, step, interp.get_variable("w"))
    finally:
        interp.run('set_dtype("float64")', "<replay>")


def test_a_branch_the_result_does_not_use_is_off_the_path():
    _, g = graph_of("\nfn f(w)\n  unused = exp(w.a)\n  return sum(w.a * w.b)\nend", "f",
                    tapeml.array.values.Record({"a": np.ones(2), "b": np.ones(2)}), "w")
    nodes, edges = g.describe()
    assert [(n[0], n[4]) for n in nodes] == [("w.a", True), ("w.b", True), ("exp", False), ("mul", True),
                                             ("sum", True)]
    assert edges == [("mul", "sum"), ("w.a", "exp"), ("w.a", "mul"), ("w.b", "mul")]


BLOCKS = """
seed(0)
blocks = (transformer_block_init(8, 2), transformer_block_init(8, 2))
x = randn(5, 8)
fn two(bs)
  h = x
  for b in bs
    h = transformer_block(h, b)
  end
  return sum(h^2)
end
"""


def _acyclic(g):
    order, seen = [], set()
    pending = {i: len(g.parents(i)) for i in g.nodes}
    ready = [i for i in g.nodes if pending[i] == 0]
    while ready:
        i = ready.pop()
        seen.add(i)
        for c in g.children(i):
            pending[c] -= 1
            if pending[c] == 0:
                ready.append(c)
    return seen == set(g.nodes)


def test_builtin_calls_collapse_repeated_blocks_fold_and_the_cap_holds():
    interp = Interpreter(out=io.StringIO())
    interp.run(BLOCKS, "b.ml")
    g = tapeview.record(interp.context, interp.get_variable("two"), interp.get_variable("blocks"), "blocks")
    # each block: q, k, v (dense_heads), attention, the output projection (heads_dense), + bo,
    # the residual add, layer_norm, dense, relu, dense, add, layer_norm: 13; then pow and sum
    assert g.recorded == 28 and sum(n.kind == "input" for n in g.nodes.values()) == 46
    shown = tapeview.fold(g)
    nodes, edges = shown.describe()
    assert [n[:2] for n in nodes] == [("blocks (46 arrays)", "input"), ("transformer_block ×2", "group"),
                                      ("pow", "op"), ("sum", "op")]
    assert shown.notes == ["2 calls of transformer_block in a row drawn as one"]
    full = tapeview.fold(g, expand=True, max_nodes=1000)
    assert sum(n.kind == "op" for n in full.nodes.values()) == 28
    capped = tapeview.fold(g, expand="transformer_block", max_nodes=20)
    assert len(capped.nodes) == 20 and _acyclic(capped) and _acyclic(full)
    more = [n for n in capped.nodes.values() if n.kind == "more"]
    assert len(more) == 1 and more[0].label.startswith("... ") and "folded into one node" in capped.notes[-1]


def test_show_tape_draws_a_figure_and_writes_png_and_svg(tmp_path):
    from tapeml.builtins import plot
    png, svg = tmp_path / "t.png", tmp_path / "t.svg"
    interp = Interpreter(out=io.StringIO())
    plot.close_all()
    interp.run(BLOCKS + f'show_tape(two, blocks, file = "{png}")\n'
               f'show_tape(fn(x) -> sum(x * 2), [1, 2, 3], file = "{svg}", expand = true)', "b.ml")
    data = png.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n" and len(data) > 1000
    assert svg.read_text().lstrip().startswith("<?xml") and "<svg" in svg.read_text()
    assert len(plot.open_figures()) == 2
    plot.close_all()
    assert not instrument.attached(interp) and tape.Box.__init__ is tape._PLAIN_INIT


@pytest.mark.parametrize("src, message", [
    ('show_tape(fn(x) -> 3, [1, 2])', "f's result does not depend on x"),
    ('show_tape(fn(x) -> sum(x), [1, 2], file = "t.jpg")', "file must end in .png or .svg"),
    ('show_tape(fn(x) -> sum(x), [1, 2], expand = 3)', "expand must be true, false"),
    ('show_tape(fn(x) -> sum(x), [1, 2], max_nodes = 2)', "max_nodes must be >= 3"),
])
def test_show_tape_errors(src, message):
    code, out = run_cli(["-c", src])
    assert code == 1 and message in out


def test_layout_dot_needs_graphviz_on_path(monkeypatch):
    monkeypatch.setenv("PATH", "")
    code, out = run_cli(["-c", 'show_tape(fn(x) -> sum(x), [1, 2], layout = "dot")'])
    assert code == 1 and "needs graphviz's dot on PATH" in out


def test_layout_dot_reads_graphvizs_positions(tmp_path, monkeypatch):
    fake = tmp_path / "dot"
    fake.write_text("#!/bin/sh\ncat > /dev/null\nprintf 'graph 1 2 3\\nnode n0 1 3 1 1 0 box\\n"
                    "node n1 1 2 1 1 1 box\\nnode n2 1 1 1 1 2 box\\nstop\\n'\n")
    fake.chmod(0o755)
    monkeypatch.setenv("PATH", str(tmp_path))
    _, g = graph_of("\nfn f(x) -> sum(x * 2)", "f", np.array([1.0, 2.0]))
    assert tapeview.dot_layout(g) == {0: (0.0, 0), 1: (0.0, 1), 2: (0.0, 2)}


def test_help_runs_check_nans_examples_without_turning_the_check_on():
    from tapeml.builtins.help import help_text
    interp = Interpreter(out=io.StringIO())
    page = help_text("check_nan", interp)
    assert "check_nan(true)" in page and "y = log(x)" in page
    assert not diagnostics.current().check_nan and not instrument.attached(interp)
    interp.set_diagnostics(check_nan=True)
    help_text("check_nan", interp)
    assert diagnostics.current().check_nan and instrument.attached(interp)


# ---- issue 38, item 9: no edge of show_tape's picture crosses a box --------------------------------
def _edges_through_boxes(defs, f, x, expand=False):
    """(the edges drawn through a box not their own, as (from, to, crossed) labels; the nodes): each
    drawn edge (parent's box bottom, its bends, child's box top) sampled in display coordinates
    against every other box's extent."""
    interp, g = graph_of(defs, f, x)
    g = tapeview.fold(g, expand)
    fig = tapeview.draw(g)
    try:
        fig.canvas.draw()
        renderer, ax = fig.canvas.get_renderer(), fig.axes[0]
        boxes = dict(zip(g.nodes, (t.get_bbox_patch().get_window_extent(renderer) for t in ax.texts
                                   if t.get_bbox_patch() is not None)))
        _, routes = tapeview.layered_routes(g)
        crossed = []
        for a, b in sorted(g.edges):
            pa, pb = boxes[a], boxes[b]
            points = ([((pa.x0 + pa.x1) / 2, pa.y0)] + [tuple(ax.transData.transform(p)) for p in routes.get((a, b), [])]
                      + [((pb.x0 + pb.x1) / 2, pb.y1)])
            for i, box in boxes.items():
                if i not in (a, b) and any(box.x0 < x0 + t * (x1 - x0) < box.x1 and box.y0 < y0 + t * (y1 - y0) < box.y1
                                           for (x0, y0), (x1, y1) in zip(points, points[1:])
                                           for t in np.linspace(0, 1, 201)):
                    crossed.append((g.nodes[a].label, g.nodes[b].label, g.nodes[i].label))
        return crossed, len(boxes)
    finally:
        import matplotlib.pyplot as plt
        plt.close(fig)


@pytest.mark.parametrize("defs,f", [
    ("fn f(x) -> sum(exp(sin(x)) * x)", "f"),          # x -> mul passed through sin and exp
    ("fn f(x) -> sum(exp(sin(cos(x))) * x + x)", "f"),
    ("fn f(x) -> sum(tanh(x * 2) * exp(x) + x ^ 2 - sin(cos(x)))", "f"),
])
def test_no_edge_of_show_tape_crosses_an_unrelated_box(defs, f):
    crossed, n = _edges_through_boxes(defs, f, np.array([1.0, 2.0, 3.0]))
    assert n >= 5 and crossed == []


def test_a_long_edge_bends_through_one_place_in_each_row_between():
    _, g = graph_of("fn f(x) -> sum(exp(sin(x)) * x)", "f", np.array([1.0, 2.0, 3.0]))
    pos, routes = tapeview.layered_routes(tapeview.fold(g))
    label = {n.label: i for i, n in g.nodes.items()}
    bends = routes[(label["x"], label["mul"])]
    assert [r for _, r in bends] == [1, 2]                  # x at row 0, mul at row 3
    assert all((x, r) != pos[i] for x, r in bends for i in pos)      # a place of its own
    assert tapeview.layered(tapeview.fold(g)) == pos


@pytest.mark.parametrize("mode", ["check_nan(true)", "show_tape_recording"])
def test_a_session_dropped_with_a_mode_on_is_freed_and_takes_its_hooks_with_it(mode):
    """A Session let go with check_nan on (or show_tape recording) is collected like any other, and
    the process-wide tape hook and operator checks go with it: the next sessions pay nothing."""
    import gc
    import weakref
    from tapeml.array import tape
    from tapeml.evaluator import semantics
    plain_init = tape._PLAIN_INIT
    s = tapeml.Session(out=io.StringIO())
    if mode == "check_nan(true)":
        s.run("check_nan(true)\nx = grad(fn(w) -> sum(w * w), [1, 2])")
        assert semantics.BINARY["*"] is not instrument._PLAIN_BINARY["*"]
    else:
        with s.entered():
            instrument.set_modes(s.interp, recorder=[])
    assert tape.Box.__init__ is not plain_init
    ref = weakref.ref(s)
    del s
    gc.collect()
    assert ref() is None
    assert tape.Box.__init__ is plain_init
    assert semantics.BINARY["*"] is instrument._PLAIN_BINARY["*"]


@pytest.mark.parametrize("body", ["  check_nan(true)\n  return sum(sqrt(w) - sqrt(w))\n",
                                  "  check_nan(true)\n  y = sqrt(w)\n  return sum(y - sqrt(w))\n"])
@pytest.mark.parametrize("how", ["grad(f, [0, 1])", "value_and_grad(f, [0, 1])[1]", "vjp(f, [0, 1], 1)[1]"])
def test_check_nan_turned_on_inside_the_differentiated_function_checks_its_backward_pass(tmp_path, body, how):
    """grad began with the check off, so its own call was not watched; the backward pass it runs
    is judged all the same (the first VJP that made the infinity is named), as with --check-nan."""
    script = tmp_path / "b.ml"
    script.write_text(f"fn f(w)\n{body}end\ng = {how}\nprint(g)\n")
    code, text = run_cli([str(script)])
    assert code == 1 and "NaNError: the backward pass of sqrt made" in text
    code, plain = run_cli(["-c", f"fn f(w) -> sum(sqrt(w) - sqrt(w))\nprint({how})"])
    assert code == 0 and "nan" in plain                   # without the check: the NaN, silently
