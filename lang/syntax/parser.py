"""Recursive-descent parser: tokens -> ast.Program. This module holds the statements (a program,
blocks, assignments, fn, if, for, while) and the strings; the expressions, one method per
precedence level, and the token cursor are in expressions.py, the class Parser extends.

Errors are LangSyntaxError with the span of the offending token; input that ends inside a
block, bracket or after an operator raises IncompleteInput.
"""
from __future__ import annotations

from tapeml.syntax import ast as A
from tapeml.syntax.errors import IncompleteInput, LangSyntaxError
from tapeml.syntax.expressions import ExpressionParser
from tapeml.syntax.formatspec import parse_spec
from tapeml.syntax.lexer import BLOCK_END, EOF, FOREIGN_WORDS, NAME, NEWLINE, NUMBER, Token, tokenize

COMPOUND = {"+=": "+", "-=": "-", "*=": "*", "/=": "/"}
BLOCKS = {"if": "if_stmt", "for": "for_stmt", "while": "while_stmt"}      # the statements that open a block


class Parser(ExpressionParser):
    """tokens -> ast.Program: the statements (and strings) over the expressions of expressions.py."""

    # ---- statements ---------------------------------------------------------------------
    def program(self) -> A.Program:
        start = self.peek().span
        body = self.block(top=True)
        if not self.check(EOF):
            tok = self.peek()
            raise self.error(f"'{tok.text}' without an open block", tok)
        return A.Program(start.to(self.peek().span), tuple(body))

    def block(self, top: bool = False) -> list[A.Node]:
        body = []
        self.skip_newlines()
        while not self.check(EOF) and not (not top and self.check(*BLOCK_END)):
            if top and self.check(*BLOCK_END):
                break
            body.append(self.statement())
            self.skip_newlines()
        return body

    def end_statement(self) -> bool:
        """Consume a statement terminator; True when it was ';' (silences the REPL echo)."""
        if self.match(";"):
            return True
        if self.match(NEWLINE) or self.check(EOF) or self.check(*BLOCK_END):
            return False
        tok = self.peek()
        prev = self.previous()
        hint = ""
        if prev.kind == NAME and prev.text in FOREIGN_WORDS:     # `lambda x: ...`, `def f(x): ...`
            hint = f"; '{prev.text}' is not tapeml: write {FOREIGN_WORDS[prev.text]}"
        raise self.error(f"expected the end of the statement (a new line or ';'), found "
                         f"{self.describe(tok)}{hint}", tok)

    def statement(self) -> A.Node:
        tok = self.peek()
        kind = tok.kind
        if kind == "fn" and self.peek(1).kind == NAME:
            return self.fn_def()
        block = BLOCKS.get(kind)
        if block is not None:
            return getattr(self, block)()
        if kind in ("break", "continue"):
            self.advance()
            if not any(b.kind in ("for", "while") for b in self.open_blocks):
                raise LangSyntaxError(f"'{kind}' belongs inside a loop (for ... end or while ... end)", tok.span)
            self.end_statement()
            return (A.Break if kind == "break" else A.Continue)(tok.span)
        if kind == "return":
            self.advance()
            if not any(b.kind == "fn" for b in self.open_blocks):
                raise LangSyntaxError("'return' belongs inside a function (fn name(...) ... end)", tok.span)
            value = None
            if not self.check(NEWLINE, ";", EOF, *BLOCK_END):
                value = self.expression()
            self.end_statement()
            return A.Return(tok.span if value is None else tok.span.to(value.span), value)
        return self.simple_statement()

    def simple_statement(self) -> A.Node:
        first = self.peek()
        if first.kind == NAME and first.text in FOREIGN_WORDS and self.peek(1).kind in (NAME, "(", NUMBER):
            nxt = self.peek(1)
            if not (nxt.kind == "(" and first.text not in ("def", "function", "elseif", "lambda")):
                raise LangSyntaxError(f"'{first.text}' is not a tapeml keyword; tapeml writes "
                                      f"{FOREIGN_WORDS[first.text]}", first.span)
        expr = self.expression()
        if self.check(","):
            targets = [expr]
            while self.match(","):
                targets.append(self.expression())
            eq = self.peek()
            if not self.match("="):
                raise self.error("a comma-separated list at statement level must be assigned: "
                                 "'a, b = pair'; write '(a, b)' for a tuple")
            for t in targets:
                self.check_target(t, eq)
            value = self.expression()
            silent = self.end_statement()
            return A.Destructure(expr.span.to(value.span), tuple(targets), value, silent)
        if self.check("=") and type(expr) is A.TupleLit and expr.items:
            # (a, b) = pair: the parenthesised form of 'a, b = pair' (as Python takes it)
            eq = self.advance()
            for t in expr.items:
                self.check_target(t, eq)
            value = self.expression()
            silent = self.end_statement()
            return A.Destructure(expr.span.to(value.span), tuple(expr.items), value, silent)
        if self.check("=", *COMPOUND):
            eq = self.advance()
            self.check_target(expr, eq)
            value = self.expression()
            silent = self.end_statement()
            return A.Assign(expr.span.to(value.span), expr, value, COMPOUND.get(eq.kind), silent)
        silent = self.end_statement()
        return A.ExprStmt(expr.span, expr, silent)

    def check_target(self, node: A.Node, eq: Token) -> None:
        root = node
        while isinstance(root, (A.Field, A.Index)):
            root = root.obj
        if type(node) is A.TupleLit:
            what = (f"'{eq.text}' updates one name, field or index; a tuple of them takes '='" if eq.kind != "="
                    else "a tuple on the left of '=' unpacks one level into names, fields or indexes: "
                         "nested tuples are not unpacked (write the inner one out: a, b = pair)")
            raise LangSyntaxError(what, node.span)
        if type(root) in (A.Bool, A.NoneLit) and root is node:
            word = "none" if type(root) is A.NoneLit else str(root.value).lower()
            raise LangSyntaxError(f"'{word}' is a value, not a name: it cannot be assigned to (pick another "
                                  f"name, such as {word}_)", node.span)
        if not isinstance(root, A.Name):
            hint = " (use '==' to compare)" if eq.kind == "=" else ""
            raise LangSyntaxError(f"the left side of '{eq.text}' must be a name, a field or an index, not this "
                                  f"expression{hint}", node.span)

    def open(self, tok: Token) -> None:
        self.open_blocks.append(tok)

    def close_block(self, opener: Token) -> Token:
        if self.check(EOF):
            hint = ""
            odd = self.misaligned
            if odd is not None:
                inner, end = odd
                hint = (f"; the 'end' at {end.span.line}:{end.span.col} closed the '{inner.text}' at "
                        f"{inner.span.line}:{inner.span.col} (indented differently): is that "
                        f"'{inner.text}' missing its own 'end'?")
            raise IncompleteInput(f"the '{opener.text}' block opened at {opener.span.line}:{opener.span.col} "
                                  f"is missing 'end'{hint}", opener.span)
        if not self.check("end"):
            raise self.error(f"expected 'end' to close the '{opener.text}' at "
                             f"{opener.span.line}:{opener.span.col}, found {self.describe(self.peek())}")
        end = self.advance()
        self.open_blocks.pop()
        if end.span.line != opener.span.line and end.span.col != opener.span.col:
            self.misaligned = (opener, end)      # remembered for a later "missing 'end'" message
        return end

    def fn_def(self) -> A.Node:
        fn_tok = self.advance()
        name = self.advance()
        params = self.params()
        if self.match("->"):
            body = self.expression()
            self.end_statement()
            lam = A.Lambda(fn_tok.span.to(body.span), params, body, name.text)
            return A.FnDef(lam.span, name.text, lam)
        self.open(fn_tok)
        body = self.block()
        end = self.close_block(fn_tok)
        self.end_statement()
        lam = A.Lambda(fn_tok.span.to(end.span), params, tuple(body), name.text)
        return A.FnDef(lam.span, name.text, lam)

    def if_stmt(self) -> A.Node:
        if_tok = self.advance()
        self.open(if_tok)
        branches = []
        cond = self.expression()
        self.no_foreign_opener("then", if_tok)
        branches.append((cond, tuple(self.block())))
        orelse = None
        while True:
            if self.match("elif"):
                elif_tok = self.previous()
                cond = self.expression()
                self.no_foreign_opener("then", elif_tok)
                branches.append((cond, tuple(self.block())))
            elif self.match("else"):
                orelse = tuple(self.block())
                if self.check("elif", "else"):
                    raise self.error(f"'{self.peek().text}' after 'else'; 'else' must be the last branch")
            else:
                break
        end = self.close_block(if_tok)
        self.end_statement()
        return A.If(if_tok.span.to(end.span), tuple(branches), orelse)

    def no_foreign_opener(self, word: str, opener: Token) -> None:
        """`if c then`, `while c do`, `for x in xs do` (Lua, Ruby, shell): tapeml's block starts
        on the next line; said at the word, whether or not the block would run."""
        tok = self.peek()
        if tok.kind == NAME and tok.text == word and tok.span.line == self.previous().span.end_line:
            raise LangSyntaxError(f"'{word}' is not tapeml: '{opener.text}' needs nothing after its "
                                  f"{'condition' if opener.text != 'for' else 'range'}; the block starts on "
                                  f"the next line and closes with 'end'", tok.span)

    def for_stmt(self) -> A.Node:
        for_tok = self.advance()
        self.open(for_tok)
        opener = self.peek()
        paren = self.match("(")   # for (a, b) in pairs: as (a, b) = pair, Python's habit
        nested = ("the loop variables of 'for' are names, as the left side of 'a, b = pair': "
                  "write 'for a, b in pairs' (nested unpacking is not supported)")
        if paren and self.check("("):
            raise self.error(nested)
        var = self.consume(NAME, "expected a loop variable after 'for'")
        if self.check(","):       # for i, v in enumerate(xs): each item is unpacked, as 'i, v = item'
            names = [A.Name(var.span, var.text)]
            while self.match(","):
                tok = self.consume(NAME, "expected a loop variable after ','; the loop variables of "
                                         "'for a, b in ...' are names (nested unpacking is not supported)")
                names.append(A.Name(tok.span, tok.text))
            if paren:
                self.consume(")", "expected ')' after the loop variables")
                if self.check(","):          # for (a, b), c in ...
                    raise self.error(nested, opener)
            self.consume("in", "expected 'in' after the loop variables")
            var = tuple(names)
        else:
            if paren:
                self.consume(")", "expected ')' after the loop variable")
            self.consume("in", "expected 'in' after the loop variable")
            var = var.text
        iterable = self.expression()
        self.no_foreign_opener("do", for_tok)
        body = self.block()
        end = self.close_block(for_tok)
        self.end_statement()
        return A.For(for_tok.span.to(end.span), var, iterable, tuple(body))

    def while_stmt(self) -> A.Node:
        tok = self.advance()
        self.open(tok)
        cond = self.expression()
        self.no_foreign_opener("do", tok)
        body = self.block()
        end = self.close_block(tok)
        self.end_statement()
        return A.While(tok.span.to(end.span), cond, tuple(body))

    def string(self, tok: Token) -> A.Node:
        parts = []
        for part in tok.value:
            if isinstance(part, str):
                parts.append(part)
            else:
                toks, span = part[:2]
                sub = Parser(toks)
                expr = sub.expression()
                if not sub.check(EOF):
                    raise sub.error(f"expected '}}' to end the interpolation, found {sub.describe(sub.peek())}")
                if len(part) == 4:      # "{x:.3f}": the spec is checked now, applied when the string is built
                    spec, spec_span = part[2:]
                    parse_spec(spec, spec_span)
                    expr = A.Formatted(spec_span, expr, spec)
                parts.append(expr)
        return A.String(tok.span, tuple(parts))


def parse(source: str, filename: str = "<input>") -> A.Program:
    """Parse a whole program. Raises LangSyntaxError / IncompleteInput."""
    parser = Parser(tokenize(source, filename))
    try:
        return parser.program()
    except RecursionError:
        # the parser is recursive; Python's stack ran out inside brackets nested this deep
        tok = parser.peek()
        raise LangSyntaxError("nesting too deep: the brackets, parentheses or operators here nest "
                              "deeper than the parser can follow; split the expression into "
                              "several statements", tok.span) from None


def is_complete(source: str) -> str:
    """'complete', 'incomplete' (more lines would finish it) or 'invalid'. Drives the REPL's Enter."""
    try:
        parse(source, "<input>")
    except IncompleteInput:
        return "incomplete"
    except LangSyntaxError:
        return "invalid"
    return "complete"
