"""Cost expressions read from text by an allow-list: nothing in the text is evaluated.

:func:`parse` reads what students write, ``(p - 1)*(alpha + n*beta)``, ``(p+k-2)(α+nβ/k)``,
``2n``, ``⌈log2 p⌉·α + (p−1)·n·β``, with its own tokenizer and a precedence-climbing parser, and
builds the sympy expression itself from what it allows: numbers, the symbols it is given (and
their aliases: ``α``, ``a`` for alpha, ``β``, ``b`` for beta), ``+ - * / ^`` and their Unicode
forms (``−``, ``×``, ``·``, ``÷``, ``**``, superscript digits), parentheses, ``⌈ ⌉`` and ``⌊ ⌋``,
and the functions of :data:`FUNCTIONS`. Anything else (an attribute, a string, a subscript, a
name it does not know) is refused with a message that names it and says what is allowed. It never
calls ``eval``, ``sympify`` or ``parse_expr``.

Juxtaposition multiplies, as on paper: ``2n``, ``(p-1)(α+nβ)``, ``p(p-1)``; a name made of known
names (``nβ``, ``pn``) is their product; a function without parentheses takes the operand that
follows it (``log2 p``, ``ceil log2 p``).

:func:`check_tree` is the same allow-list for an expression that is already a sympy object (one
rebuilt from a notebook's answer): only the node kinds of :data:`ALLOWED_NODES`.
"""

import math
import re

import sympy

from mpilab.core.errors import UsageError

#: Longest text read (characters), deepest nesting, longest number (digits).
MAX_TEXT, MAX_DEPTH, MAX_DIGITS = 2000, 60, 40
#: Largest number (in bits) that a power of two numbers may make.
MAX_POWER_BITS = 4096


def _log(x, base=None):
    return sympy.log(x) if base is None else sympy.log(x, base)


#: name -> (sympy builder, allowed numbers of arguments).
FUNCTIONS = {
    "log": (_log, (1, 2)),
    "ln": (sympy.log, (1,)),
    "log2": (lambda x: sympy.log(x, 2), (1,)),
    "ceil": (sympy.ceiling, (1,)),
    "ceiling": (sympy.ceiling, (1,)),
    "floor": (sympy.floor, (1,)),
    "sqrt": (sympy.sqrt, (1,)),
    "min": (sympy.Min, (2, 3, 4)),
    "max": (sympy.Max, (2, 3, 4)),
    "Min": (sympy.Min, (2, 3, 4)),
    "Max": (sympy.Max, (2, 3, 4)),
}
#: Other spellings of symbols: name -> the symbol's name.
ALIASES = {"α": "alpha", "a": "alpha", "β": "beta", "b": "beta"}

#: The sympy node kinds an allowed expression is made of (numbers and symbols aside).
ALLOWED_NODES = (
    sympy.Add,
    sympy.Mul,
    sympy.Pow,
    sympy.log,
    sympy.ceiling,
    sympy.floor,
    sympy.Min,
    sympy.Max,
    sympy.Abs,
    sympy.Mod,
    sympy.Piecewise,
    sympy.functions.elementary.piecewise.ExprCondPair,
    sympy.core.relational.Relational,
    sympy.And,
    sympy.Or,
    sympy.Not,
    sympy.Tuple,
)

#: The leaves an allowed expression may have.
_LEAVES = (sympy.Symbol, sympy.Number, sympy.NumberSymbol, sympy.logic.boolalg.BooleanAtom)

_OPERATORS = {
    "+": "+",
    "-": "-",
    "\u2212": "-",  # minus sign
    "*": "*",
    "\u00d7": "*",  # multiplication sign
    "\u00b7": "*",  # middle dot
    "\u22c5": "*",  # dot operator
    "\u2219": "*",  # bullet operator
    "/": "/",
    "\u00f7": "/",  # division sign
    "^": "^",
    "(": "(",
    ")": ")",
    ",": ",",
    "\u2308": "⌈",
    "\u2309": "⌉",
    "\u230a": "⌊",
    "\u230b": "⌋",
}
_SUPERSCRIPTS = {c: str(i) for i, c in enumerate("⁰¹²³⁴⁵⁶⁷⁸⁹")}
_NUMBER = re.compile(r"[0-9]+(?:\.[0-9]*)?(?:[eE][+-]?[0-9]+)?|\.[0-9]+(?:[eE][+-]?[0-9]+)?")
_DIGITS = "0123456789"


def with_article(noun):
    """``noun`` with "a" or "an" in front."""
    return ("an " if noun[:1].lower() in "aeiou" else "a ") + noun


class ExpressionError(UsageError):
    """Text that is not an allowed expression; the message names what is not allowed."""


def allowed_text(symbols):
    """What :func:`parse` allows, in words (the end of every refusal)."""
    names = []
    for name in symbols:
        alias = [a for a, to in ALIASES.items() if to == name]
        names.append(f"{name} ({', '.join(alias)})" if alias else name)
    return (
        f"valid: numbers, the symbols {', '.join(names)}, the operators + - * / ^ (also − × · ÷ "
        f"and **), parentheses, ⌈ ⌉ ⌊ ⌋, and the functions "
        f"{', '.join(sorted({f for f in FUNCTIONS if f.islower()}))}; e.g. (p - 1)*(alpha + n*beta)"
    )


class _Parser:
    def __init__(self, text, symbols):
        self.text = text
        self.symbols = dict(symbols)
        for alias, name in ALIASES.items():
            if name in self.symbols and alias not in self.symbols:
                self.symbols[alias] = self.symbols[name]
        self.tokens = self._tokens()
        self.i = 0
        self.depth = 0

    # ---- errors ---------------------------------------------------------------------------

    def fail(self, what, at=None):
        """Refuse: ``what`` (at character ``at``) is not allowed."""
        where = "" if at is None else f" at character {at + 1}"
        self.syntax(f"{what}{where} is not allowed")

    def syntax(self, why):
        shown = self.text if len(self.text) <= 80 else self.text[:77] + "..."
        raise ExpressionError(
            f"cannot read {shown!r} as an expression: {why}; "
            + allowed_text([s for s in self.symbols if s not in ALIASES])
        )

    # ---- tokens ---------------------------------------------------------------------------

    def _tokens(self):
        """(kind, value, position): kinds num, name, op, end."""
        text, out, i = self.text, [], 0
        while i < len(text):
            c = text[i]
            if c.isspace():
                i += 1
                continue
            if text.startswith("**", i):
                out.append(("op", "^", i))
                i += 2
                continue
            if c in _OPERATORS:
                out.append(("op", _OPERATORS[c], i))
                i += 1
                continue
            if c in _SUPERSCRIPTS:
                j = i
                while j < len(text) and text[j] in _SUPERSCRIPTS:
                    j += 1
                out.append(("op", "^", i))
                out.append(("num", "".join(_SUPERSCRIPTS[d] for d in text[i:j]), i))
                i = j
                continue
            m = _NUMBER.match(text, i)
            if m:
                if len(m.group()) > MAX_DIGITS:
                    self.fail(f"a number of {len(m.group())} characters", i)
                out.append(("num", m.group(), i))
                i = m.end()
                continue
            if c.isalpha():
                j = i + 1
                while j < len(text) and (text[j].isalpha() or text[j] in _DIGITS or text[j] == "_"):
                    j += 1
                out.extend(self._names(text[i:j], i))
                i = j
                continue
            self.fail(repr(c) if c not in "'\"" else f"a quote ({c})", i)
        out.append(("end", None, len(text)))
        return out

    def _names(self, word, at):
        """A word as known names: itself, or split into known names (``nβ`` is n β, ``log2p`` is
        log2 p); else refused."""
        if word in self.symbols or word in FUNCTIONS:
            return [("name", word, at)]
        parts, i = [], 0
        known = sorted(set(self.symbols) | set(FUNCTIONS), key=len, reverse=True)
        while i < len(word):
            name = next((k for k in known if word.startswith(k, i)), None)
            if name is None:
                self.fail(f"the name {word!r}", at)
            parts.append(("name", name, at + i))
            i += len(name)
        return parts

    def peek(self):
        return self.tokens[self.i]

    def take(self, value=None):
        tok = self.tokens[self.i]
        if value is not None and tok[1] != value:
            if tok[0] == "end":
                self.syntax(f"a {value!r} is missing at the end")
            self.fail(repr(tok[1]), tok[2])
        self.i += 1
        return tok

    # ---- grammar --------------------------------------------------------------------------

    def parse(self):
        if self.peek()[0] == "end":
            raise ExpressionError(
                "the expression is empty; " + allowed_text([s for s in self.symbols if s not in ALIASES])
            )
        e = self.expr()
        tok = self.peek()
        if tok[0] != "end":
            self.fail(repr(tok[1]), tok[2])
        return e

    def nest(self):
        self.depth += 1
        if self.depth > MAX_DEPTH:
            self.syntax(f"it is nested deeper than {MAX_DEPTH} levels")

    def expr(self):
        self.nest()
        e = self.term()
        while self.peek()[:2] in (("op", "+"), ("op", "-")):
            op = self.take()[1]
            t = self.term()
            e = e + t if op == "+" else e - t
        self.depth -= 1
        return e

    def _starts_operand(self, tok):
        return tok[0] in ("num", "name") or tok[:2] in (("op", "("), ("op", "⌈"), ("op", "⌊"))

    def term(self):
        e = self.unary()
        while True:
            tok = self.peek()
            if tok[:2] in (("op", "*"), ("op", "/")):
                self.take()
                f = self.unary()
                e = e * f if tok[1] == "*" else e / f
            elif self._starts_operand(tok):  # juxtaposition: 2n, (p-1)(a+b), p(p-1)
                e = e * self.power()
            else:
                return e

    def unary(self):
        tok = self.peek()
        if tok[:2] in (("op", "+"), ("op", "-")):
            self.take()
            self.nest()
            v = self.unary()
            self.depth -= 1
            return v if tok[1] == "+" else -v
        return self.power()

    def power(self):
        base = self.operand()
        if self.peek()[:2] == ("op", "^"):
            at = self.take()[2]
            self.nest()
            exponent = self.unary()
            self.depth -= 1
            return self._pow(base, exponent, at)
        return base

    def _pow(self, base, exponent, at):
        try:
            return power(base, exponent)
        except ExpressionError as exc:
            self.fail(str(exc), at)

    def operand(self):
        kind, value, at = self.take()
        if kind == "num":
            return sympy.Float(value) if any(c in value for c in ".eE") else sympy.Integer(value)
        if kind == "name":
            if value in FUNCTIONS:
                return self.call(value, at)
            return self.symbols[value]
        if (kind, value) == ("op", "("):
            e = self.expr()
            self.take(")")
            return e
        if (kind, value) in (("op", "⌈"), ("op", "⌊")):
            e = self.expr()
            self.take("⌉" if value == "⌈" else "⌋")
            return sympy.ceiling(e) if value == "⌈" else sympy.floor(e)
        if kind == "end":
            self.syntax("it ends where an operand should come")
        self.fail(repr(value), at)

    def call(self, name, at):
        build, counts = FUNCTIONS[name]
        self.nest()
        if self.peek()[:2] == ("op", "("):
            self.take()
            args = [self.expr()]
            while self.peek()[:2] == ("op", ","):
                self.take()
                args.append(self.expr())
            self.take(")")
        elif self._starts_operand(self.peek()):
            args = [self.power()]  # log2 p, ceil log2 p
        else:
            self.syntax(f"{name} at character {at + 1} has no argument")
        self.depth -= 1
        if len(args) not in counts:
            self.syntax(
                f"{name} at character {at + 1} takes {' or '.join(map(str, counts))} "
                f"argument(s), not {len(args)}"
            )
        return build(*args)


def _log2(number):
    """log2 of a positive sympy number, without converting a large one to a float."""
    if number.is_Rational:
        return math.log2(int(number.p)) - math.log2(int(number.q))
    return math.log2(float(number))


def power(base, exponent):
    """``base ** exponent``, refused (:class:`ExpressionError`) when the exponent is a number
    above 1000 in size or two numbers would make one of more than :data:`MAX_POWER_BITS` bits."""
    if exponent.is_Number:
        if abs(exponent) > 1000:
            raise ExpressionError(f"the exponent {exponent}")
        if base.is_Number and base.is_zero is False and base.is_finite:
            bits = float(abs(exponent)) * max(1.0, abs(_log2(abs(base))))
            if bits > MAX_POWER_BITS:
                raise ExpressionError(f"a power of {bits:.0f} bits")
    return sympy.Pow(base, exponent)


def parse(text, symbols):
    """Read ``text`` as an expression in ``symbols`` (``{name: sympy.Symbol}``), by the
    allow-list of the module's description.

    Raises
    ------
    ExpressionError
        Text that is too long, empty, or holds anything not allowed (the message names it and
        lists what is allowed).
    """
    if not isinstance(text, str):
        raise ExpressionError(f"expected text, got {with_article(type(text).__name__)}")
    if len(text) > MAX_TEXT:
        raise ExpressionError(f"the expression is {len(text)} characters long; at most {MAX_TEXT} are read")
    parser = _Parser(text, symbols)
    try:
        return parser.parse()
    except (ArithmeticError, TypeError, ValueError) as exc:
        if isinstance(exc, ExpressionError):
            raise
        parser.syntax(f"it does not evaluate ({type(exc).__name__}: {exc or 'no value'})")


def check_tree(expr, shown=None):
    """``expr`` itself if it is a sympy expression made only of numbers, symbols and the node
    kinds of :data:`ALLOWED_NODES`; else :class:`ExpressionError` naming the first other node.

    A value that is not a sympy object (text, a list, a dict) is refused, never converted.
    """
    if not isinstance(expr, sympy.Basic):
        raise ExpressionError(
            f"expected an expression, got {with_article(type(expr).__name__)}"
            + (f" ({shown!r})" if shown is not None and len(str(shown)) < 200 else "")
        )
    for node in sympy.preorder_traversal(expr):
        if isinstance(node, _LEAVES):
            continue
        if not isinstance(node, ALLOWED_NODES):
            raise ExpressionError(
                f"{type(node).__name__} is not allowed in an expression"
                + (f" ({shown!r})" if shown is not None and len(str(shown)) < 200 else "")
                + "; valid: numbers, symbols, + - * / ^, log, ceiling, floor, sqrt, Min, Max, Abs, Mod, "
                "Piecewise and its conditions"
            )
    return expr
