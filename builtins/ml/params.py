"""Statistics & ML: param_count and summary, the size of a weights tree."""
from __future__ import annotations

from tapeml.array.backend import ARRAYS
from tapeml.array.primitive_table import size_of
from tapeml.builtins.registry import P, builtin
from tapeml.builtins.util import tree_leaves
from tapeml.array.tape import raw
from tapeml.array.values import shape_text

CAT = "Statistics & ML"


def _leaves(value, path: str | None = "", what: str = "the value"):
    """(path, shape, count) of every number and float matrix in a record/tuple tree."""
    out = []
    for p, v in tree_leaves(value, path, "skip", what):
        r = raw(v)
        out.append((p, tuple(r.shape), size_of(r)) if type(r) in ARRAYS else (p, (), 1))
    return out


@builtin("param_count", CAT, "How many numbers a value holds: the parameter count of a weights record.",
         [P("value", doc="a number, matrix, tuple or record, nested")], returns="number",
         what="How many trainable numbers a model has: the element count of every number and float matrix "
              "in a nested record or tuple, such as a transformer_block_init record (12,704 for D = 32, 4 heads).",
         errors=["none for any one value: a value holding no numbers counts 0 (TypeError only for a wrong "
                 "number of arguments)", "ValueError when the value nests tuples and records more than 20000 deep"],
         how="The sum of the element counts of every number and float matrix in the tree (a number counts "
             "1). Strings, bools, bool matrices, none and functions count 0.",
         examples=["param_count({w = zeros(8, 16), b = zeros(16)})",
                   "param_count(transformer_block_init(32, 4, seed=0))",
                   "param_count((transformer_block_init(16, 2, norm=\"rms_norm\"), transformer_block_init(16, 2, norm=\"rms_norm\")))"])
def param_count(value):
    return float(sum(n for _, _, n in _leaves(value, None, "param_count(): the value")))


def _fmt_shape(shape):
    """A table cell: rows x columns as values.shape_text writes them, a vector by its length alone."""
    return "number" if not shape else str(shape[0]) if len(shape) == 1 else shape_text(shape)


@builtin("summary", CAT, "Print a table of a weights value's parameters: path, shape and count, with the total.",
         [P("weights", doc="a record, tuple or matrix of parameters")], returns="none", context=True,
         what="One row per number or matrix in the tree, named by its path (heads[0].wq, w1, ...), then the "
              "total, which is param_count(weights).",
         how="Walks the tree in field order; counts as param_count. Shapes print as rows x columns.",
         errors=["none for any one value: a value holding no numbers prints an empty table with total 0",
                 "ValueError when weights nests tuples and records more than 20000 deep"],
         examples=["summary({w = zeros(8, 16), b = zeros(16)})",
                   "summary(transformer_block_init(8, 2, mlp_ratio=2, seed=0))"])
def summary(ctx, weights):
    leaves = _leaves(weights, "", "summary(): weights")
    rows = [(p or "(value)", _fmt_shape(s), f"{n:,}") for p, s, n in leaves]
    total = f"{sum(n for _, _, n in leaves):,}"
    wp = max([len("parameter")] + [len(r[0]) for r in rows] + [len("total")])
    ws = max([len("shape")] + [len(r[1]) for r in rows])
    wc = max([len("count"), len(total)] + [len(r[2]) for r in rows])
    lines = [f"{'parameter':<{wp}}  {'shape':<{ws}}  {'count':>{wc}}"]
    lines += [f"{p:<{wp}}  {s:<{ws}}  {c:>{wc}}" for p, s, c in rows]
    lines.append("-" * (wp + ws + wc + 4))
    lines.append(f"{'total':<{wp}}  {'':<{ws}}  {total:>{wc}}")
    ctx.out.write("\n".join(lines) + "\n")
    return None
