"""The expressions of the recursive-descent parser, one method per precedence level (lowest first):

    or < and < not < comparison (no chaining) < range a:b, a:s:b < + - < * / % @
       < unary - + < ^ (right-assoc) < postfix call, index, field, transpose

then the operands (names, numbers, literals: tuples, matrices, records, dictionaries, anonymous
functions, imports), over a cursor on the tokens (`peek`, `check`, `advance`, `match`,
`consume`, `error`; jlox's Parser helpers). The statements, and the strings (an interpolation
parses its expression with a whole Parser of its own), are in parser.py's Parser, the class
that extends this one.
"""
from __future__ import annotations

from tapeml.syntax import ast as A
from tapeml.syntax.errors import IncompleteInput, LangSyntaxError
from tapeml.syntax.lexer import CONTINUES, EOF, NAME, NEWLINE, NUMBER, STRING, Token

NO_CONDITIONAL = ("; tapeml has no conditional expression (Python's 'a if c else b'): write where(c, a, b), "
                  "or an if statement that assigns in each branch")
COMPARISONS = ("==", "!=", "<", "<=", ">", ">=")
BRACKETS = {"(": "paren", "[": "matrix", "{": "record"}       # the literals that open a bracket


class ExpressionParser:
    """The cursor and the expressions; parser.py's Parser adds the statements and `string`."""

    def __init__(self, tokens: list[Token]):
        self.toks = tokens
        self.i = 0
        self.index_depth = 0
        self.open_blocks: list[Token] = []
        self.misaligned: tuple | None = None

    # ---- helpers ------------------------------------------------------------------------
    def peek(self, k: int = 0) -> Token:
        return self.toks[min(self.i + k, len(self.toks) - 1)]

    def check(self, *kinds: str) -> bool:
        return self.peek().kind in kinds

    def advance(self) -> Token:
        tok = self.toks[self.i]
        if tok.kind != EOF:
            self.i += 1
        return tok

    def previous(self) -> Token:
        return self.toks[self.i - 1]

    def match(self, *kinds: str) -> Token | None:
        if self.check(*kinds):
            return self.advance()
        return None

    def describe(self, tok: Token) -> str:
        if tok.kind == EOF:
            return "the end of the input"
        if tok.kind == NEWLINE:
            return "the end of the line"
        if tok.kind == STRING:
            return "a string"
        return f"'{tok.text}'"

    def error(self, message: str, tok: Token | None = None) -> LangSyntaxError:
        tok = tok or self.peek()
        if tok.kind == EOF and self.open_blocks:
            b = self.open_blocks[-1]
            return IncompleteInput(f"{message} (the '{b.text}' block opened at "
                                   f"{b.span.line}:{b.span.col} is missing 'end')", b.span)
        if tok.kind == EOF:
            return IncompleteInput(message, tok.span)
        if tok.kind == "if" and NO_CONDITIONAL not in message:     # `a if c else b`, anywhere
            message += NO_CONDITIONAL
        return LangSyntaxError(message, tok.span)

    def consume(self, kind: str, message: str) -> Token:
        if self.check(kind):
            return self.advance()
        raise self.error(f"{message}, found {self.describe(self.peek())}")

    def skip_newlines(self) -> None:
        while self.check(NEWLINE, ";"):
            self.advance()

    # ---- expressions ----------------------------------------------------------------------
    def expression(self) -> A.Node:
        expr = self.or_expr()
        if self.check("in") or (self.check("not") and self.peek(1).kind == "in"):
            # Python's `k in d` / `k not in d`: an expression never goes on with 'in'
            tok = self.peek()
            neg = "not " if tok.kind == "not" else ""
            raise LangSyntaxError(f"tapeml has no '{neg}in' operator: write {neg}contains(container, item) "
                                  f"(a dictionary's keys, a tuple's items, a substring)", tok.span)
        return expr

    def or_expr(self) -> A.Node:
        left = self.and_expr()
        while self.match("or"):
            right = self.and_expr()
            left = A.Logical(left.span.to(right.span), "or", left, right)
        return left

    def and_expr(self) -> A.Node:
        left = self.not_expr()
        while self.match("and"):
            right = self.not_expr()
            left = A.Logical(left.span.to(right.span), "and", left, right)
        return left

    def not_expr(self) -> A.Node:
        if self.check("not"):
            tok = self.advance()
            operand = self.not_expr()
            return A.Unary(tok.span.to(operand.span), "not", operand)
        return self.comparison()

    def comparison(self) -> A.Node:
        left = self.range_expr()
        if self.check(*COMPARISONS):
            op = self.advance()
            right = self.range_expr()
            if self.check(*COMPARISONS):
                op2 = self.peek()
                raise LangSyntaxError(
                    f"comparisons do not chain: write 'a {op.text} b and b {op2.text} c' "
                    f"instead of 'a {op.text} b {op2.text} c'", op2.span)
            return A.Binary(left.span.to(right.span), op.kind, left, right, op.span)
        return left

    def range_expr(self) -> A.Node:
        start = self.additive()
        if self.check(":"):
            self.advance()
            second = self.additive()
            if self.match(":"):
                third = self.additive()
                return A.Range(start.span.to(third.span), start, second, third)
            return A.Range(start.span.to(second.span), start, None, second)
        return start

    def additive(self) -> A.Node:
        left = self.multiplicative()
        while self.check("+", "-"):
            op = self.advance()
            right = self.multiplicative()
            left = A.Binary(left.span.to(right.span), op.kind, left, right, op.span)
        return left

    def multiplicative(self) -> A.Node:
        left = self.unary()
        while self.check("*", "/", "%", "@"):
            op = self.advance()
            right = self.unary()
            left = A.Binary(left.span.to(right.span), op.kind, left, right, op.span)
        return left

    def unary(self) -> A.Node:
        if self.check("-", "+"):
            op = self.advance()
            operand = self.unary()
            if op.kind == "-" and isinstance(operand, A.Number) and False:
                return operand
            return A.Unary(op.span.to(operand.span), op.kind, operand)
        return self.power()

    def power(self) -> A.Node:
        base = self.postfix()
        if self.check("^"):
            op = self.advance()
            exponent = self.unary()     # right-associative; `2^-1` allowed
            return A.Binary(base.span.to(exponent.span), "^", base, exponent, op.span)
        return base

    def postfix(self) -> A.Node:
        expr = self.primary()
        while True:
            if self.check("("):
                expr = self.call(expr)
            elif self.check("["):
                expr = self.index(expr)
            elif self.check("."):
                self.advance()
                name = self.consume(NAME, "expected a field name after '.'")
                expr = A.Field(expr.span.to(name.span), expr, name.text)
            elif self.check("'"):
                tok = self.advance()
                expr = A.Transpose(expr.span.to(tok.span), expr)
            else:
                return expr

    def call(self, func: A.Node) -> A.Node:
        self.advance()
        args, kwargs = [], []
        while not self.check(")"):
            if self.check(NAME) and self.peek(1).kind == "=":
                name = self.advance()
                self.advance()
                if any(k == name.text for k, _ in kwargs):
                    raise LangSyntaxError(f"'{name.text}=' is given twice in this call", name.span)
                kwargs.append((name.text, self.expression()))
            else:
                arg = self.expression()
                if kwargs:
                    raise LangSyntaxError(f"this argument has no name but comes after '{kwargs[-1][0]}=': the "
                                          f"arguments by position come first, then those by name, as in "
                                          f"f(x, 2, dim=0)", arg.span)
                args.append(arg)
            if not self.match(","):
                break
        close = self.consume(")", "expected ',' or ')' in the argument list")
        return A.Call(func.span.to(close.span), func, tuple(args), tuple(kwargs))

    def index(self, obj: A.Node) -> A.Node:
        self.advance()
        self.index_depth += 1
        items = []
        while not self.check("]"):
            if self.check(":") and self.peek(1).kind in (",", "]"):
                tok = self.advance()
                items.append(A.Colon(tok.span))
            else:
                items.append(self.expression())
            if not self.match(","):
                break
        self.index_depth -= 1
        close = self.consume("]", "expected ',' or ']' in the index")
        if not items:
            raise LangSyntaxError("empty index: write x[i], x[i, j] or x[:, j]", obj.span.to(close.span))
        return A.Index(obj.span.to(close.span), obj, tuple(items))

    def primary(self) -> A.Node:
        tok = self.peek()
        kind = tok.kind
        if kind == NUMBER:
            self.advance()
            return A.Number(tok.span, tok.value)
        if kind == STRING:
            self.advance()
            return self.string(tok)
        if kind == NAME:
            self.advance()
            return A.Name(tok.span, tok.text)
        if kind in ("true", "false"):
            self.advance()
            return A.Bool(tok.span, kind == "true")
        if kind == "none":
            self.advance()
            return A.NoneLit(tok.span)
        if kind == "end":
            if self.index_depth > 0:
                self.advance()
                return A.End(tok.span)
            self.dangling_operator(tok)
            raise self.error("'end' without an open block", tok)
        bracket = BRACKETS.get(kind)
        if bracket is not None:
            return getattr(self, bracket)()
        if kind == "fn":
            self.advance()
            params = self.params()
            arrow = self.consume("->", "an anonymous function is 'fn(x) -> expression'; expected '->'")
            body = self.expression()
            return A.Lambda(tok.span.to(body.span), params, body)
        if kind == "import":
            self.advance()
            self.consume("(", "expected '(' after import: import(\"file.ml\")")
            path = self.expression()
            close = self.consume(")", "expected ')' after the import path")
            return A.Import(tok.span.to(close.span), path)
        if kind in (EOF,):
            raise self.error("expected an expression, found the end of the input", tok)
        self.dangling_operator(tok)
        hint = ""
        if self.i > 0 and self.previous().kind == ":" and kind in ("]", ","):
            hint = "; a range inside brackets names both ends: x[1:end], x[0:2]"
        elif kind == ":" and self.i > 0 and self.previous().kind in ("[", ","):
            hint = "; a range inside brackets names both ends: x[0:2], x[1:end] (a lone ':' is the whole axis)"
        elif kind == "." and self.peek(1).kind == "." and self.peek(2).kind == ".":     # x[..., 0]
            hint = "; tapeml has no '...' (Ellipsis): write every axis, x[:, :, 0]"
        raise self.error(f"expected an expression, found {self.describe(tok)}{hint}", tok)

    def dangling_operator(self, tok: Token) -> None:
        """A line that ends with an operator continues on the next one (the lexer joins them);
        when the next line does not start an operand, the operator is the mistake."""
        prev = self.previous() if self.i > 0 else None
        if prev is not None and prev.kind in CONTINUES and prev.span.line < tok.span.line:
            raise LangSyntaxError(f"line {prev.span.line} ends with '{prev.text}', so an operand must follow, "
                                  f"but the next line starts with {self.describe(tok)}", prev.span)
    def paren(self) -> A.Node:
        open_ = self.advance()
        saved = self.index_depth
        self.index_depth = 0 if saved == 0 else saved
        if self.check(")"):
            close = self.advance()
            return A.TupleLit(open_.span.to(close.span), ())
        first = self.expression()
        if self.check(")"):
            self.advance()
            return first
        items = [first]
        while self.match(","):
            if self.check(")"):
                break
            items.append(self.expression())
        close = self.consume(")", "expected ',' or ')' in the parentheses")
        return A.TupleLit(open_.span.to(close.span), tuple(items))

    def matrix(self) -> A.Node:
        open_ = self.advance()
        rows = [[]]
        stacked = False
        # inside an index a matrix literal keeps 'end' (x[:, [end]], x[[0, end - 1]]): it means the
        # last index of the axis the literal indexes
        if not self.check("]"):
            while True:
                rows[-1].append(self.expression())
                if self.match(","):
                    continue
                if self.match(";"):
                    stacked = True
                    if self.check("]"):     # a trailing ';' ends the last row: [1, 2;] is 1x2
                        break
                    rows.append([])
                    continue
                if self.check("]"):
                    break
                tok = self.peek()
                if tok.kind == EOF:
                    raise self.error("expected ']' to close the matrix", tok)
                raise self.error(f"matrix elements need commas: expected ',', ';' or ']', "
                                 f"found {self.describe(tok)}", tok)
        close = self.consume("]", "expected ']' to close the matrix")
        return A.Matrix(open_.span.to(close.span), tuple(tuple(r) for r in rows if r), stacked)

    def record(self) -> A.Node:
        """`{name = value, ...}` a record; `{key: value, ...}` a dictionary (`{:}` the empty one).
        The first item decides: a name followed by '=' (or `{}`) is a record."""
        open_ = self.advance()
        if self.check(":") and self.peek(1).kind == "}":
            self.advance()
            close = self.advance()
            return A.DictLit(open_.span.to(close.span), ())
        if not self.check("}") and not (self.check(NAME) and self.peek(1).kind == "="):
            return self.dictionary(open_)
        fields = []
        while not self.check("}"):
            name = self.consume(NAME, "expected a field name in the record (write {name = value})")
            self.consume("=", f"expected '=' after the field name '{name.text}'")
            if any(n == name.text for n, _ in fields):
                raise LangSyntaxError(f"field '{name.text}' given twice", name.span)
            fields.append((name.text, self.expression()))
            if not self.match(","):
                break
        close = self.consume("}", "expected ',' or '}' in the record")
        return A.RecordLit(open_.span.to(close.span), tuple(fields))

    def dictionary(self, open_: Token) -> A.Node:
        items = []
        while not self.check("}"):
            key = self.additive()      # below the range level: the ':' after it separates the value
            if not self.check(":"):
                hint = (" (a record is {name = value}: the first field decides which it is)"
                        if self.check("=") else "")
                raise self.error(f"expected ':' after the key in the dictionary {{key: value}}, found "
                                 f"{self.describe(self.peek())}{hint}")
            self.advance()
            items.append((key, self.expression()))
            if not self.match(","):
                break
        close = self.consume("}", "expected ',' or '}' in the dictionary")
        return A.DictLit(open_.span.to(close.span), tuple(items))

    def params(self) -> tuple:
        self.consume("(", "expected '(' and the parameter list after 'fn'")
        params = []
        seen_default = False
        while not self.check(")"):
            tok = self.consume(NAME, "expected a parameter name")
            default = None
            if self.match("="):
                default = self.expression()
                seen_default = True
            elif seen_default:
                raise LangSyntaxError(f"'{tok.text}' has no default but comes after a parameter with one: the "
                                      f"parameters with defaults go last, as in fn f(a, b=1)", tok.span)
            if any(p.name == tok.text for p in params):
                raise LangSyntaxError(f"two parameters are named '{tok.text}'", tok.span)
            params.append(A.Param(tok.span, tok.text, default))
            if not self.match(","):
                break
        self.consume(")", "expected ')' after the parameters")
        return tuple(params)
