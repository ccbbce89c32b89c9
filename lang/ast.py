"""AST nodes: frozen dataclasses, each with the Span of the source it came from.

A node keeps the span of the token it will blame (a Binary keeps its operator's span in
`op_span`), and desugared nodes copy the span of their source.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Optional, Union

from .errors import Span


@dataclass(frozen=True, eq=False)
class Node:
    span: Span = field(repr=False, compare=False)

    def __eq__(self, other):   # structural equality, spans ignored (used by round-trip tests)
        if type(self) is not type(other):
            return False
        return all(getattr(self, f) == getattr(other, f)
                   for f in self.__dataclass_fields__ if f not in ("span", "op_span"))

    __hash__ = object.__hash__


# ---- expressions ----------------------------------------------------------------------
@dataclass(frozen=True, eq=False)
class Number(Node):
    value: float


@dataclass(frozen=True, eq=False)
class String(Node):
    parts: tuple  # each a str or an expression node (interpolation)


@dataclass(frozen=True, eq=False)
class Bool(Node):
    value: bool


@dataclass(frozen=True, eq=False)
class NoneLit(Node):
    pass


@dataclass(frozen=True, eq=False)
class Name(Node):
    name: str


@dataclass(frozen=True, eq=False)
class Matrix(Node):
    rows: tuple          # tuple of rows, each a tuple of expressions
    stacked: bool        # True when the literal used ';' (the result has rank 2)


@dataclass(frozen=True, eq=False)
class TupleLit(Node):
    items: tuple


@dataclass(frozen=True, eq=False)
class RecordLit(Node):
    fields: tuple        # tuple of (name, expression)


@dataclass(frozen=True, eq=False)
class Unary(Node):
    op: str              # '-' '+' 'not'
    operand: Node


@dataclass(frozen=True, eq=False)
class Binary(Node):
    op: str              # arithmetic and comparison operators
    left: Node
    right: Node
    op_span: Span = field(default=None, repr=False, compare=False)


@dataclass(frozen=True, eq=False)
class Logical(Node):
    op: str              # 'and' 'or' (short-circuit)
    left: Node
    right: Node


@dataclass(frozen=True, eq=False)
class Range(Node):
    start: Node
    step: Optional[Node]
    stop: Node


@dataclass(frozen=True, eq=False)
class Call(Node):
    func: Node
    args: tuple
    kwargs: tuple        # tuple of (name, expression)


@dataclass(frozen=True, eq=False)
class Index(Node):
    obj: Node
    indices: tuple


@dataclass(frozen=True, eq=False)
class Field(Node):
    obj: Node
    name: str


@dataclass(frozen=True, eq=False)
class Transpose(Node):
    operand: Node


@dataclass(frozen=True, eq=False)
class End(Node):
    """`end` inside index brackets: the last index of that axis."""


@dataclass(frozen=True, eq=False)
class Colon(Node):
    """A bare `:` inside index brackets: the whole axis."""


@dataclass(frozen=True, eq=False)
class Param(Node):
    name: str
    default: Optional[Node]


@dataclass(frozen=True, eq=False)
class Lambda(Node):
    params: tuple
    body: Union[Node, tuple]   # an expression (`fn(x) -> e`) or a block of statements
    name: str = "<anonymous>"


@dataclass(frozen=True, eq=False)
class Import(Node):
    path: Node


# ---- statements -----------------------------------------------------------------------
@dataclass(frozen=True, eq=False)
class ExprStmt(Node):
    expr: Node
    silent: bool = False   # the statement ended with ';' (no REPL echo)


@dataclass(frozen=True, eq=False)
class Assign(Node):
    target: Node         # Name, Field or Index chain rooted at a Name
    value: Node
    op: Optional[str] = None   # '+', '-', '*', '/' for compound assignment
    silent: bool = False


@dataclass(frozen=True, eq=False)
class Destructure(Node):
    targets: tuple       # of assignment targets
    value: Node
    silent: bool = False


@dataclass(frozen=True, eq=False)
class If(Node):
    branches: tuple      # tuple of (condition, body)
    orelse: Optional[tuple]


@dataclass(frozen=True, eq=False)
class For(Node):
    var: str
    iterable: Node
    body: tuple


@dataclass(frozen=True, eq=False)
class While(Node):
    cond: Node
    body: tuple


@dataclass(frozen=True, eq=False)
class Break(Node):
    pass


@dataclass(frozen=True, eq=False)
class Continue(Node):
    pass


@dataclass(frozen=True, eq=False)
class Return(Node):
    value: Optional[Node]


@dataclass(frozen=True, eq=False)
class FnDef(Node):
    name: str
    fn: Lambda


@dataclass(frozen=True, eq=False)
class Program(Node):
    body: tuple
