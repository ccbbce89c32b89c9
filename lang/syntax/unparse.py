"""Print an AST back to tapeml source.

`unparse(node)` gives source text that parses to the same tree (spans aside):
`parse(unparse(parse(s))) == parse(s)`. Every compound expression is wrapped in parentheses,
so the output never depends on precedence or associativity; statements use one line each and
blocks close with `end`. Used by the round-trip fuzz test and handy for debugging the parser.
"""
from __future__ import annotations

import math

from tapeml.syntax import ast as A

INDENT = "    "
_ESCAPES = {"\\": "\\\\", '"': '\\"', "\n": "\\n", "\t": "\\t", "{": "{{", "}": "}}"}

# nodes that print as one token or a bracketed whole, and so never need parentheses
_ATOMS = (A.Name, A.Bool, A.NoneLit, A.End, A.Colon, A.String, A.Matrix, A.TupleLit, A.RecordLit,
          A.DictLit,           A.Call, A.Index, A.Field, A.Transpose, A.Import)


def unparse(node) -> str:
    """Source text for an expression, a statement or a whole Program."""
    if isinstance(node, A.Program):
        return "\n".join(_stmt(s, 0) for s in node.body) + ("\n" if node.body else "")
    if isinstance(node, (A.ExprStmt, A.Assign, A.Destructure, A.If, A.For, A.While, A.Break,
                         A.Continue, A.Return, A.FnDef)):
        return _stmt(node, 0)
    return _expr(node)


# ---- expressions ------------------------------------------------------------------------
def _number(v: float) -> str:
    if math.isinf(v):
        return "1e999"          # the lexer reads an overflowing literal as inf
    if math.isnan(v):
        raise ValueError("a NaN cannot come from a tapeml literal")
    return repr(float(v))


def _string(parts) -> str:
    out = ['"']
    for p in parts:
        if isinstance(p, str):
            out.append("".join(_ESCAPES.get(c, c) for c in p))
        else:
            spec = ""
            if type(p) is A.Formatted:
                p, spec = p.value, ":" + p.spec
            # parenthesized unless one unit: a top-level ':' (a range) would start a format spec
            text = _atom(p)
            if text.startswith("{") or text.endswith("}"):
                text = f" {text} "       # `{{` would be a literal brace
            out.append("{" + text + spec + "}")
    out.append('"')
    return "".join(out)


def _atom(node, postfix: bool = False) -> str:
    """`node` as an operand: parenthesized unless it is already one unit (a number is one,
    except before a postfix `.`, `'`, `(` or `[`)."""
    text = _expr(node)
    if isinstance(node, _ATOMS) or (type(node) is A.Number and not postfix):
        return text
    return f"({text})"


def _params(params) -> str:
    return ", ".join(p.name if p.default is None else f"{p.name} = {_expr(p.default)}" for p in params)


def _expr(node) -> str:
    t = type(node)
    if t is A.Number:
        return _number(node.value)
    if t is A.String:
        return _string(node.parts)
    if t is A.Bool:
        return "true" if node.value else "false"
    if t is A.NoneLit:
        return "none"
    if t is A.Name:
        return node.name
    if t is A.End:
        return "end"
    if t is A.Colon:
        return ":"
    if t is A.Matrix:
        # a stacked literal of one row ends in ';' ([1, 2;]); rows are never empty
        end = ";" if node.stacked and len(node.rows) == 1 else ""
        return "[" + "; ".join(", ".join(_atom(x) for x in row) for row in node.rows) + end + "]"
    if t is A.TupleLit:
        if len(node.items) == 1:
            return f"({_expr(node.items[0])},)"
        return "(" + ", ".join(_expr(x) for x in node.items) + ")"
    if t is A.RecordLit:
        return "{" + ", ".join(f"{k} = {_expr(v)}" for k, v in node.fields) + "}"
    if t is A.DictLit:
        if not node.items:
            return "{:}"
        # a key is parsed above the range level (its ':' ends it): parenthesized unless one unit
        return "{" + ", ".join(f"{_atom(k)}: {_expr(v)}" for k, v in node.items) + "}"
    if t is A.Unary:
        sep = " " if node.op == "not" else ""
        return f"{node.op}{sep}{_atom(node.operand)}"
    if t is A.Binary or t is A.Logical:
        return f"{_atom(node.left)} {node.op} {_atom(node.right)}"
    if t is A.Range:
        if node.step is None:
            return f"{_atom(node.start)} : {_atom(node.stop)}"
        return f"{_atom(node.start)} : {_atom(node.step)} : {_atom(node.stop)}"
    if t is A.Call:
        args = [_expr(a) for a in node.args] + [f"{k} = {_expr(v)}" for k, v in node.kwargs]
        return f"{_atom(node.func, True)}({', '.join(args)})"
    if t is A.Index:
        return f"{_atom(node.obj, True)}[{', '.join(_expr(i) for i in node.indices)}]"
    if t is A.Field:
        return f"{_atom(node.obj, True)}.{node.name}"
    if t is A.Transpose:
        return f"{_atom(node.operand, True)}'"
    if t is A.Lambda:
        if isinstance(node.body, tuple):
            raise ValueError("a block-bodied function is a statement (FnDef), not an expression")
        return f"fn({_params(node.params)}) -> {_atom(node.body)}"
    if t is A.Import:
        return f"import({_expr(node.path)})"
    raise ValueError(f"unparse: not an expression node: {t.__name__}")


# ---- statements -------------------------------------------------------------------------
def _block(body, depth: int) -> list[str]:
    return [_stmt(s, depth) for s in body]


def _stmt(node, depth: int) -> str:
    pad = INDENT * depth
    t = type(node)
    if t is A.ExprStmt:
        return pad + _expr(node.expr) + (";" if node.silent else "")
    if t is A.Assign:
        op = "=" if node.op is None else node.op + "="
        return f"{pad}{_expr(node.target)} {op} {_expr(node.value)}" + (";" if node.silent else "")
    if t is A.Destructure:
        return (f"{pad}{', '.join(_expr(x) for x in node.targets)} = {_expr(node.value)}"
                + (";" if node.silent else ""))
    if t is A.If:
        lines = []
        for i, (cond, body) in enumerate(node.branches):
            lines.append(f"{pad}{'if' if i == 0 else 'elif'} {_expr(cond)}")
            lines.extend(_block(body, depth + 1))
        if node.orelse is not None:
            lines.append(pad + "else")
            lines.extend(_block(node.orelse, depth + 1))
        lines.append(pad + "end")
        return "\n".join(lines)
    if t is A.For:
        var = node.var if isinstance(node.var, str) else ", ".join(n.name for n in node.var)
        return "\n".join([f"{pad}for {var} in {_expr(node.iterable)}",
                          *_block(node.body, depth + 1), pad + "end"])
    if t is A.While:
        return "\n".join([f"{pad}while {_expr(node.cond)}", *_block(node.body, depth + 1), pad + "end"])
    if t is A.Break:
        return pad + "break"
    if t is A.Continue:
        return pad + "continue"
    if t is A.Return:
        return pad + "return" + ("" if node.value is None else " " + _expr(node.value))
    if t is A.FnDef:
        lam = node.fn
        head = f"{pad}fn {node.name}({_params(lam.params)})"
        if not isinstance(lam.body, tuple):
            return f"{head} -> {_expr(lam.body)}"
        return "\n".join([head, *_block(lam.body, depth + 1), pad + "end"])
    raise ValueError(f"unparse: not a statement node: {t.__name__}")
