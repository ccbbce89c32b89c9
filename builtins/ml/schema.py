"""Statistics & ML: the validators of the transformer builtins' arguments and weights records.

One shape rule (`need_shape`, whose error kind is a parameter: ShapeError for an argument of
the wrong shape, ValueError for a weights-record field of the wrong shape), the field rule
(`need_field`), and the layouts of heads, blocks, decoder blocks, memories and masks. Errors
name the path of the offending field and both shapes.
"""
from __future__ import annotations

from tapeml.array import ops
from tapeml.array.backend import ARRAYS
from tapeml.array.primitive_table import is_bool_array
from tapeml.syntax.errors import ShapeError, TypeErr, ValueErr
from tapeml.array.tape import raw
from tapeml.array.values import Record, describe, shape_text


def _shape(v):
    return ops.shape_of(v)


def need_field(rec, name: str, path: str, needed: str):
    r = raw(rec)
    if not isinstance(r, Record):
        raise TypeErr(f"{path} must be a record ({needed}), got {describe(rec)}")
    if name not in r.fields:
        raise ValueErr(f"{path} is missing the field '{name}' (it needs {needed}; it has "
                       f"{', '.join(r.fields) or 'no fields'})")
    v = r.fields[name]
    rv = raw(v)
    if not (isinstance(rv, float) or type(rv) in ARRAYS):
        raise TypeErr(f"{path}.{name} must be a matrix, got {describe(v)}")
    return v


def need_shape(v, path: str, expected: tuple, error=ShapeError):
    """v must have the shape `expected`; otherwise an `error` naming the path and both shapes:
    ShapeError (the default) for an argument, ValueErr for a field of a weights record (the record's
    layout is wrong, not the shape of an argument)."""
    got = _shape(v)
    if got != expected:
        raise error(f"{path} is {shape_text(got)}, expected {shape_text(expected)}")


HEAD_FIELDS = "wq, wk, wv, wo (optional bq, bk, bv)"
HEAD_ALLOWED = ("wq", "wk", "wv", "wo", "bq", "bk", "bv")


def _schema_matrix(v, path: str, rows: int, what: str):
    """A 2-D field whose row count is fixed and whose column count is free; returns the columns."""
    s = _shape(v)
    if len(s) != 2 or s[0] != rows:
        raise ValueErr(f"{path} is {shape_text(s)}, expected {rows}x{what}")
    return s[1]


def _heads_well_formed(heads: tuple, d_model: int) -> bool:
    """The common case of check_heads in one quick pass: every head a record of matrices of the
    expected shapes. False sends the caller to the field-by-field checks that name the error."""
    first = raw(heads[0])
    if type(first) is not Record:
        return False
    f = first.fields
    wq, wv = raw(f.get("wq")), raw(f.get("wv"))
    if type(wq) not in ARRAYS or type(wv) not in ARRAYS or wq.ndim != 2 or wv.ndim != 2:
        return False
    d_k, d_v = wq.shape[1], wv.shape[1]
    expected = {"wq": (d_model, d_k), "wk": (d_model, d_k), "wv": (d_model, d_v), "wo": (d_v, d_model),
                "bq": (d_k,), "bk": (d_k,), "bv": (d_v,)}
    for h in heads:
        h = raw(h)
        if type(h) is not Record:
            return False
        fields = h.fields
        if "wq" not in fields or "wk" not in fields or "wv" not in fields or "wo" not in fields:
            return False
        for name, v in fields.items():
            v = raw(v)
            if type(v) not in ARRAYS or v.shape != expected.get(name):
                return False
    return True


def check_heads(heads, d_model: int, path: str = "heads"):
    """Check a tuple of head records against the model width; every head must have the width
    (d_k, d_v) of the first. Errors name the path and both shapes."""
    r = raw(heads)
    if not isinstance(r, tuple) or not r:
        raise TypeErr(f"{path} must be a non-empty tuple of head records {{{HEAD_FIELDS}}}, got {describe(heads)}")
    if _heads_well_formed(r, d_model):
        return r
    d_k = d_v = None
    for i, h in enumerate(r):
        hp = f"{path}[{i}]"
        for f in ("wq", "wk", "wv", "wo"):
            need_field(h, f, hp, HEAD_FIELDS)
        fields = raw(h).fields
        if "bo" in fields:
            raise ValueErr(f"{hp}.bo: the output bias is one vector for all heads (PyTorch's out_proj.bias), "
                           f"so it is not stored in a head: put it in the block's weights.bo, or pass "
                           f"multi_head_attention(..., bo=)")
        extra = [k for k in fields if k not in HEAD_ALLOWED]
        if extra:
            raise ValueErr(f"{hp} has an unknown field '{extra[0]}' (a head has {HEAD_FIELDS})")
        if d_k is None:
            d_k = _schema_matrix(fields["wq"], f"{hp}.wq", d_model, "d_k")
            d_v = _schema_matrix(fields["wv"], f"{hp}.wv", d_model, "d_v")
        need_shape(fields["wq"], f"{hp}.wq", (d_model, d_k), ValueErr)
        need_shape(fields["wk"], f"{hp}.wk", (d_model, d_k), ValueErr)
        need_shape(fields["wv"], f"{hp}.wv", (d_model, d_v), ValueErr)
        need_shape(fields["wo"], f"{hp}.wo", (d_v, d_model), ValueErr)
        for b, n in (("bq", d_k), ("bk", d_k), ("bv", d_v)):
            if b in fields:
                need_shape(need_field(h, b, hp, HEAD_FIELDS), f"{hp}.{b}", (n,), ValueErr)
    return r


def dropout_range(v):
    return None if 0 <= v < 1 else "must be >= 0 and < 1"


def at_least_one(v):
    return None if v >= 1 else "must be >= 1"


def check_memory(memory, xs: tuple, fname: str, name: str = "memory"):
    """The memory of cross-attention against x's shape xs: S x D for an unbatched x, B x S x D for
    a batched one, with x's width D and batch B, and at least one position."""
    ms = _shape(memory)
    want = "S x D" if len(xs) == 2 else f"{xs[0]} x S x D"
    if len(ms) != len(xs):
        raise ShapeError(f"{fname}: x is {shape_text(xs)}, so {name} must be {want} (positions x "
                         f"features{', batch first' if len(xs) == 3 else ''}), got {describe(memory)}")
    if ms[-1] != xs[-1]:
        raise ShapeError(f"{fname}: x has {xs[-1]} features but {name} has {ms[-1]} (x is {shape_text(xs)}, "
                         f"{name} is {shape_text(ms)}): cross-attention needs {name}'s width, its last "
                         f"axis, to equal x's")
    if len(xs) == 3 and ms[0] != xs[0]:
        raise ShapeError(f"{fname}: x is a batch of {xs[0]} and {name} a batch of {ms[0]} (x is "
                         f"{shape_text(xs)}, {name} is {shape_text(ms)}): they must be equal")
    if ms[-2] == 0:
        raise ShapeError(f"{fname}: {name} has no positions ({shape_text(ms)}): there is nothing to attend to")


def broadcasts_into(shape: tuple, target: tuple) -> bool:
    """Whether an array of `shape` broadcasts to `target` without making it bigger (PyTorch's and
    NumPy's rule: sizes compared from the right, a size 1 repeats, missing leading axes count as 1)."""
    return len(shape) <= len(target) and all(a == b or a == 1 for a, b in zip(reversed(shape), reversed(target)))


def check_mask(mask, xs: tuple, n_keys: int, fname: str, name: str = "mask", n_heads: int | None = None):
    """A 'may attend' mask for queries x (shape xs) over n_keys keys: a bool matrix that broadcasts
    (PyTorch's rule) to [..., T, S], x's leading axes then queries x keys: T x S, B x T x S, and
    also B x 1 x S (a padding mask) or 1 x T x S. With n_heads, a mask of one more axis than x is
    per head, [..., H, T, S] (H or 1)."""
    m = raw(mask)
    if not is_bool_array(m):
        raise TypeErr(f"{fname}: {name} must be a bool matrix (true = may attend), got {describe(mask)}")
    target = tuple(xs[:-1]) + (n_keys,)
    if broadcasts_into(tuple(m.shape), target):
        return
    if n_heads is not None and m.ndim == len(target) + 1 and \
            broadcasts_into(tuple(m.shape), target[:-2] + (n_heads,) + target[-2:]):
        return
    words = {2: "queries x keys", 3: "batch x queries x keys"}.get(len(target), "x's leading axes, queries, keys")
    per_head = (f"; with one more axis, one mask per head: {_sizes(target[:-2] + (n_heads,) + target[-2:])}"
                if n_heads is not None else "")
    raise ShapeError(f"{fname}: {name} is {shape_text(tuple(m.shape))}, which does not broadcast to {_sizes(target)} "
                     f"({words}) by PyTorch's rule (sizes compared from the right, a size-1 axis repeats, missing "
                     f"leading axes count as 1){per_head}")


def _sizes(shape) -> str:
    return "x".join(str(n) for n in shape)


def head_mask(mask, xs: tuple):
    """A mask checked by check_mask(..., n_heads=H), arranged against the attention weights
    [..., H, T, S]: a mask without a head axis gets one of size 1 (its leading axes padded with 1s
    to x's), a per-head mask is kept. Plain bools: a mask is never differentiated."""
    m = raw(mask)
    if m.ndim == len(xs) + 1:
        return m
    lead = len(xs) - m.ndim        # the axes of [..., T, S] the mask leaves out count as 1
    m = m.reshape((1,) * lead + tuple(m.shape))
    return m[..., None, :, :]


def _check_layers(w, d: int, heads: tuple, gains: tuple, needed: str) -> int:
    """The layers every block has, in the order their errors are reported: the model width (from
    ln1_gamma), the heads tuples, the norm gains [D], then the feed-forward w1 [D, H] and w2 [H, D].
    Returns the feed-forward width H."""
    fields = raw(w).fields
    g1 = raw(fields.get("ln1_gamma"))
    if type(g1) in ARRAYS and g1.ndim == 1 and g1.shape[0] != d:
        raise ShapeError(f"x has {d} features (its last axis) but the weights are for d_model "
                         f"{g1.shape[0]} (weights.ln1_gamma has length {g1.shape[0]})")
    for name in heads:
        check_heads(fields[name], d, f"weights.{name}")
    for name in gains:
        need_shape(need_field(w, name, "weights", needed), f"weights.{name}", (d,), ValueErr)
    hidden = _schema_matrix(need_field(w, "w1", "weights", needed), "weights.w1", d, "hidden")
    w2 = need_field(w, "w2", "weights", needed)
    s2 = _shape(w2)
    if len(s2) == 2 and s2[1] == d and s2[0] != hidden:     # the widths disagree: either may be the wrong one
        raise ValueErr(f"weights.w1 is {shape_text(_shape(fields['w1']))} and weights.w2 is {shape_text(s2)}: "
                       f"the feed-forward width must agree, but w1 has {hidden} columns and w2 has {s2[0]} rows")
    need_shape(w2, "weights.w2", (hidden, d), ValueErr)
    return hidden


BLOCK_FIELDS = "heads, ln1_gamma, ln1_beta, w1, b1, w2, b2, ln2_gamma, ln2_beta"
BLOCK_OPTIONAL = ("bo", "gamma1", "gamma2")


def _biases(fields, names: tuple, block: str) -> list:
    """The biases of `names` the weights hold: all of them or none (a bias-free block); some but
    not all is the ValueError naming the first missing one."""
    present = [b for b in names if b in fields]
    if present and len(present) < len(names):
        missing = next(b for b in names if b not in fields)
        raise ValueErr(f"weights is missing the field '{missing}': it has {', '.join(present)}, and a "
                       f"{block} has all of {', '.join(names)} or none of them (bias-free)")
    return present


def check_block(weights, d: int, norm: str) -> dict:
    """Check a transformer_block weights record against the model width d; return its fields.

    Layout: heads (tuple of head records), optional bo [D]; ln1_gamma, ln2_gamma [D]; w1 [D, H],
    w2 [H, D]; the biases b1 [H], b2 [D] and (layer_norm only) ln1_beta, ln2_beta [D] are all
    present or all absent (PyTorch's bias=False); optional layer scale gamma1, gamma2 [D], both or
    neither. rms_norm records have no ln*_beta. Unknown fields are errors (they catch typos)."""
    w = raw(weights)
    fields = w.fields
    betas = ("ln1_beta", "ln2_beta")
    if norm == "rms_norm":
        for b in betas:
            if b in fields:
                raise ValueErr(f"weights.{b}: an rms_norm block has no norm bias; remove the field "
                               f"or use norm=\"layer_norm\"")
        needed = "heads, ln1_gamma, w1, b1, w2, b2, ln2_gamma"
        bias_names = ("b1", "b2")
    else:
        needed = BLOCK_FIELDS
        bias_names = ("ln1_beta", "b1", "b2", "ln2_beta")
    allowed = ("heads", "ln1_gamma", "w1", "w2", "ln2_gamma") + bias_names + BLOCK_OPTIONAL
    extra = [k for k in fields if k not in allowed]
    if extra:
        raise ValueErr(f"weights has an unknown field '{extra[0]}' (a {norm} block has {needed}, "
                       f"and optionally bo, gamma1, gamma2)")
    if "heads" not in fields:
        raise ValueErr(f"weights is missing the field 'heads' (it needs {needed})")
    hidden = _check_layers(w, d, ("heads",), ("ln1_gamma", "ln2_gamma"), needed)
    if norm == "layer_norm" and not any(b in fields for b in betas) and all(b in fields for b in ("b1", "b2")):
        raise ValueErr("weights has no ln1_beta/ln2_beta but has b1, b2: these look like rms_norm weights; "
                       "pass norm=\"rms_norm\" (or add the layer-norm biases)")
    present = _biases(fields, bias_names, f"{norm} block")
    for b in present:
        need_shape(need_field(w, b, "weights", needed), f"weights.{b}", (hidden if b == "b1" else d,), ValueErr)
    if "bo" in fields:
        need_shape(need_field(w, "bo", "weights", needed), "weights.bo", (d,), ValueErr)
    ls = [g for g in ("gamma1", "gamma2") if g in fields]
    if len(ls) == 1:
        other = "gamma2" if ls[0] == "gamma1" else "gamma1"
        raise ValueErr(f"weights is missing the field '{other}': layer scale needs both gamma1 "
                       f"(attention branch) and gamma2 (feed-forward branch), or neither")
    for g in ls:
        need_shape(need_field(w, g, "weights", needed), f"weights.{g}", (d,), ValueErr)
    return fields


DECODER_FIELDS = ("self_heads, cross_heads, ln1_gamma, ln1_beta, ln2_gamma, ln2_beta, ln3_gamma, ln3_beta, "
                  "w1, b1, w2, b2 (optional self_bo, cross_bo)")
DECODER_BIASES = ("ln1_beta", "ln2_beta", "ln3_beta", "b1", "b2")


def check_decoder_block(weights, d: int) -> dict:
    """Check a transformer_decoder_block weights record against the model width d; return its fields.

    Layout: self_heads, cross_heads (tuples of head records, as multi_head_attention takes), optional
    self_bo, cross_bo [D]; ln1_gamma, ln2_gamma, ln3_gamma [D]; w1 [D, H], w2 [H, D]; the biases
    ln1_beta, ln2_beta, ln3_beta [D], b1 [H], b2 [D] all present or all absent (bias-free). Unknown
    fields are errors (they catch typos, and a transformer_block record passed by mistake)."""
    w = raw(weights)
    if not isinstance(w, Record):
        raise TypeErr(f"transformer_decoder_block(): weights must be a record ({DECODER_FIELDS}), "
                      f"got {describe(weights)}")
    fields = w.fields
    allowed = ("self_heads", "cross_heads", "self_bo", "cross_bo", "ln1_gamma", "ln2_gamma", "ln3_gamma",
               "w1", "w2") + DECODER_BIASES
    extra = [k for k in fields if k not in allowed]
    if extra:
        hint = (" (a transformer_block record? a decoder block has self_heads and cross_heads)"
                if extra[0] in ("heads", "bo") else "")
        raise ValueErr(f"weights has an unknown field '{extra[0]}'{hint}; a decoder block has {DECODER_FIELDS}")
    for name in ("self_heads", "cross_heads"):
        if name not in fields:
            raise ValueErr(f"weights is missing the field '{name}' (it needs {DECODER_FIELDS})")
    hidden = _check_layers(w, d, ("self_heads", "cross_heads"), ("ln1_gamma", "ln2_gamma", "ln3_gamma"),
                           DECODER_FIELDS)
    present = _biases(fields, DECODER_BIASES, "decoder block")
    for b in present + [b for b in ("self_bo", "cross_bo") if b in fields]:
        need_shape(need_field(w, b, "weights", DECODER_FIELDS), f"weights.{b}", (hidden if b == "b1" else d,), ValueErr)
    return fields
