"""AST nodes: immutable records, each with the Span of the source it came from.

A node keeps the span of the token it will blame (a Binary keeps its operator's span in
`op_span`), and desugared nodes copy the span of their source. Nodes compare structurally with
spans ignored (the round-trip tests rely on it).

Nodes are declared like dataclasses (annotated fields, defaults as class attributes) and built
by the small `node` decorator below, which makes the same frozen, positional-or-keyword
records as `dataclass(frozen=True)` without its start-up cost (it generates code per class).
"""
from __future__ import annotations

from typing import Optional, Union

from tapeml.syntax.errors import Span

_SKIP_IN_EQ = ("span", "op_span")


class Node:
    __slots__ = ("span",)
    _fields: tuple = ("span",)
    _defaults: dict = {}
    span: Span

    def __setattr__(self, name, value):
        raise AttributeError(f"AST nodes are immutable ({type(self).__name__}.{name})")

    def __eq__(self, other):   # structural equality, spans ignored (used by round-trip tests)
        if type(self) is not type(other):
            return False
        return all(getattr(self, f) == getattr(other, f) for f in self._fields if f not in _SKIP_IN_EQ)

    __hash__ = object.__hash__

    def __repr__(self):
        parts = ", ".join(f"{f}={getattr(self, f)!r}" for f in self._fields if f not in _SKIP_IN_EQ)
        return f"{type(self).__name__}({parts})"


def node(cls):
    """Turn an annotated subclass of Node into an immutable record type (fields in order)."""
    own = [name for name in cls.__dict__.get("__annotations__", {})]
    fields = tuple(cls.__mro__[1]._fields) + tuple(own)
    defaults = dict(cls.__mro__[1]._defaults)
    for name in own:
        if name in cls.__dict__:
            defaults[name] = cls.__dict__[name]
    setter = object.__setattr__

    def __init__(self, *args, **kw):
        if len(args) > len(fields):
            raise TypeError(f"{cls.__name__} takes {len(fields)} fields, got {len(args)}")
        for name, value in zip(fields, args):
            setter(self, name, value)
        for name in fields[len(args):]:
            if name in kw:
                setter(self, name, kw[name])
            elif name in defaults:
                setter(self, name, defaults[name])
            else:
                raise TypeError(f"{cls.__name__} is missing the field '{name}'")

    namespace = {k: v for k, v in cls.__dict__.items() if k not in own and k not in ("__dict__", "__weakref__")}
    namespace.update(__slots__=tuple(own), _fields=fields, _defaults=defaults, __init__=__init__)
    cls._replaced = True        # the annotated draft stays a subclass of Node: walks over them skip it
    return type(cls.__name__, cls.__bases__, namespace)


# ---- expressions ----------------------------------------------------------------------
@node
class Number(Node):
    value: float


@node
class String(Node):
    parts: tuple  # each a str or an expression node (interpolation)


@node
class Bool(Node):
    value: bool


@node
class NoneLit(Node):
    pass


@node
class Name(Node):
    name: str


@node
class Matrix(Node):
    rows: tuple          # tuple of rows, each a tuple of expressions
    stacked: bool        # True when the literal used ';' (the result has rank 2)


@node
class TupleLit(Node):
    items: tuple


@node
class RecordLit(Node):
    fields: tuple        # tuple of (name, expression)


@node
class DictLit(Node):
    items: tuple         # tuple of (key expression, value expression); () is the empty {:}


@node
class Formatted(Node):
    """An interpolation with a format spec, "{value:spec}", only inside String.parts; the span is
    the spec's (value has its own)."""
    value: Node
    spec: str            # the text between ':' and '}', checked by formatspec.parse_spec


@node
class Unary(Node):
    op: str              # '-' '+' 'not'
    operand: Node


@node
class Binary(Node):
    op: str              # arithmetic and comparison operators
    left: Node
    right: Node
    op_span: Span = None


@node
class Logical(Node):
    op: str              # 'and' 'or' (short-circuit)
    left: Node
    right: Node


@node
class Range(Node):
    start: Node
    step: Optional[Node]
    stop: Node


@node
class Call(Node):
    func: Node
    args: tuple
    kwargs: tuple        # tuple of (name, expression)


@node
class Index(Node):
    obj: Node
    indices: tuple


@node
class Field(Node):
    obj: Node
    name: str


@node
class Transpose(Node):
    operand: Node


@node
class End(Node):
    """`end` inside index brackets: the last index of that axis."""


@node
class Colon(Node):
    """A bare `:` inside index brackets: the whole axis."""


@node
class Param(Node):
    name: str
    default: Optional[Node]


@node
class Lambda(Node):
    params: tuple
    body: Union[Node, tuple]   # an expression (`fn(x) -> e`) or a block of statements
    name: str = "<anonymous>"


@node
class Import(Node):
    path: Node


# ---- statements -----------------------------------------------------------------------
@node
class ExprStmt(Node):
    expr: Node
    silent: bool = False   # the statement ended with ';' (no REPL echo)


@node
class Assign(Node):
    target: Node         # Name, Field or Index chain rooted at a Name
    value: Node
    op: Optional[str] = None   # '+', '-', '*', '/' for compound assignment
    silent: bool = False


@node
class Destructure(Node):
    targets: tuple       # of assignment targets
    value: Node
    silent: bool = False


@node
class If(Node):
    branches: tuple      # tuple of (condition, body)
    orelse: Optional[tuple]


@node
class For(Node):
    var: object          # the loop variable's name (str), or a tuple of Name nodes: for i, v in ...
    iterable: Node
    body: tuple


@node
class While(Node):
    cond: Node
    body: tuple


@node
class Break(Node):
    pass


@node
class Continue(Node):
    pass


@node
class Return(Node):
    value: Optional[Node]


@node
class FnDef(Node):
    name: str
    fn: Lambda


@node
class Program(Node):
    body: tuple
