"""A JSON schema ``pattern`` (an ECMAScript regular expression) as a GBNF expression.

Supported: literals and escapes, ``.``, character classes with ranges and negation,
``\\d \\w \\s`` (and their negations), groups (capturing, ``(?:``, named), alternation and the
quantifiers ``? * + {n} {n,} {n,m}`` (lazy forms read as greedy). Lookarounds and
backreferences cannot be expressed in a context-free grammar and are refused. The pattern
is read as anchored at both ends, so every string the grammar allows also matches it.

Two limits keep the grammar cheap for llama.cpp to run (a pattern is untrusted input):
its size once repetitions are expanded, and repetitions of something that can match the
empty string, which make the grammar ambiguous (``(a?){4000}`` gives llama.cpp thousands
of parallel parses per character). Where the empty match can be taken out exactly — ``(x?){n}``
is ``x{0,n}`` — it is; otherwise the pattern is refused.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from . import gbnf

MAX_PATTERN_SIZE = 2_000  # symbols after expanding every repetition
MAX_PATTERN_REPEAT = 1_000  # the largest count one quantifier may name
MAX_PATTERN_NESTING = 32
MAX_PATTERN_AMBIGUITY = 200  # parses followed at once (see `ambiguity`)

_DIGIT = [(0x30, 0x39)]
_WORD = [(0x30, 0x39), (0x41, 0x5A), (0x5F, 0x5F), (0x61, 0x7A)]
_SPACE = [(0x09, 0x0D), (0x20, 0x20), (0xA0, 0xA0), (0x2028, 0x2029), (0xFEFF, 0xFEFF)]
_ANY = gbnf.complement([(0x0A, 0x0A), (0x0D, 0x0D), (0x2028, 0x2029)])  # '.' excludes line ends
_CLASS_ESCAPES = {"d": _DIGIT, "w": _WORD, "s": _SPACE}
_CHAR_ESCAPES = {"n": "\n", "r": "\r", "t": "\t", "f": "\f", "v": "\v", "0": "\0"}


class PatternError(ValueError):
    """The pattern cannot be (or is too costly to be) written as a grammar."""


# -- the tree ------------------------------------------------------------------------------


@dataclass(frozen=True)
class Chars:
    ranges: tuple[tuple[int, int], ...]


@dataclass(frozen=True)
class Seq:
    items: tuple["Node", ...]


@dataclass(frozen=True)
class Alt:
    options: tuple["Node", ...]


@dataclass(frozen=True)
class Rep:
    item: "Node"
    low: int
    high: int | None


Node = Chars | Seq | Alt | Rep
# define(name_hint, body) -> the name of a new rule with that body
RuleSink = Callable[[str, str], str]
EMPTY = Seq(())


def nullable(node: Node) -> bool:
    if isinstance(node, Chars):
        return False
    if isinstance(node, Seq):
        return all(nullable(n) for n in node.items)
    if isinstance(node, Alt):
        return any(nullable(n) for n in node.options)
    return node.low == 0 or nullable(node.item)


def without_empty(node: Node) -> Node | None:
    """The same language minus the empty string, when that can be written exactly."""
    if not nullable(node):
        return node
    if isinstance(node, Rep) and not nullable(node.item):
        return Rep(node.item, max(node.low, 1), node.high)
    if isinstance(node, Rep) and (inner := without_empty(node.item)) is not None:
        # (x)* with x nullable: x's non-empty part, repeated at least once.
        return Rep(inner, 1, None if node.high is None else node.high)
    if isinstance(node, Alt):
        options = [without_empty(o) for o in node.options if o != EMPTY]
        if any(o is None for o in options):
            return None
        kept = tuple(o for o in options if o is not None)
        return kept[0] if len(kept) == 1 else Alt(kept) if kept else None
    if isinstance(node, Seq) and len(node.items) == 1:
        return without_empty(node.items[0])
    return None


def width(node: Node) -> tuple[int, int | None]:
    """The shortest and longest string ``node`` matches (None: no longest)."""
    if isinstance(node, Chars):
        return 1, 1
    if isinstance(node, Rep):
        low, high = width(node.item)
        top = None if high is None or node.high is None else high * node.high
        return low * node.low, top
    widths = [width(n) for n in (node.items if isinstance(node, Seq) else node.options)]
    if not widths:
        return 0, 0
    if isinstance(node, Seq):
        highs = [h for _, h in widths]
        return sum(lo for lo, _ in widths), None if None in highs else sum(h for h in highs if h is not None)
    highs = [h for _, h in widths]
    return min(lo for lo, _ in widths), None if None in highs else max(h for h in highs if h is not None)


def ambiguity(node: Node) -> int:
    """How many parses llama.cpp may have to follow at once, roughly.

    A bounded, variable count of something whose length varies (``(a{1,10}){1,100}``) can
    split the same text in many ways, each a separate grammar stack, and every rejected token
    is checked against all of them. Fixed-length items and unbounded loops do not multiply."""
    if isinstance(node, Chars):
        return 1
    if isinstance(node, (Seq, Alt)):
        parts = node.items if isinstance(node, Seq) else node.options
        return max((ambiguity(n) for n in parts), default=1)
    inner = ambiguity(node.item)
    low, high = width(node.item)
    if node.high is None or node.high == node.low or low == high:
        return inner
    return (node.high - node.low + 1) * max(inner, size(node.item))


def size(node: Node) -> int:
    if isinstance(node, Chars):
        return 1
    if isinstance(node, Seq):
        return sum(size(n) for n in node.items)
    if isinstance(node, Alt):
        return sum(size(n) for n in node.options)
    return size(node.item) * max(1, node.low if node.high is None else node.high)


# -- parsing -------------------------------------------------------------------------------


class _Parser:
    def __init__(self, pattern: str) -> None:
        self.text = pattern
        self.pos = 0
        self.depth = 0

    def peek(self) -> str:
        return self.text[self.pos] if self.pos < len(self.text) else ""

    def take(self) -> str:
        char = self.peek()
        if not char:
            raise PatternError("the pattern ends too early")
        self.pos += 1
        return char

    def parse(self) -> Node:
        if self.peek() == "^":
            self.pos += 1
        node = self.alternation()
        if self.pos != len(self.text):
            raise PatternError(f"unexpected {self.peek()!r} at position {self.pos}")
        return node

    def alternation(self) -> Node:
        options = [self.sequence()]
        while self.peek() == "|":
            self.pos += 1
            options.append(self.sequence())
        return options[0] if len(options) == 1 else Alt(tuple(options))

    def sequence(self) -> Node:
        items: list[Node] = []
        while self.peek() not in ("", "|", ")"):
            if self.peek() == "$" and self.pos == len(self.text) - 1:
                self.pos += 1
                break
            atom = self.atom()
            items.append(self.quantified(atom))
        return items[0] if len(items) == 1 else Seq(tuple(items))

    def atom(self) -> Node:
        char = self.take()
        if char == "(":
            return self.group()
        if char == "[":
            return Chars(tuple(self.char_class()))
        if char == ".":
            return Chars(tuple(_ANY))
        if char == "\\":
            return self.escape(in_class=False)
        if char in "*+?{":
            if char == "{" and not self._looks_like_count(self.pos):
                return Chars(((ord(char), ord(char)),))
            raise PatternError(f"a quantifier with nothing to repeat at position {self.pos - 1}")
        if char in "^$":
            raise PatternError("anchors are only supported at the start and the end of a pattern")
        return Chars(((ord(char), ord(char)),))

    def group(self) -> Node:
        self.depth += 1
        if self.depth > MAX_PATTERN_NESTING:
            raise PatternError(f"the pattern nests groups more than {MAX_PATTERN_NESTING} deep")
        if self.peek() == "?":
            self.pos += 1
            kind = self.take()
            if kind == "<" and self.peek() not in ("=", "!"):
                self._skip_name(">")
            elif kind == "P" and self.peek() == "<":
                self.pos += 1
                self._skip_name(">")
            elif kind != ":":
                raise PatternError("lookarounds cannot be expressed as a grammar")
        node = self.alternation()
        if self.take() != ")":
            raise PatternError("a group is not closed")
        self.depth -= 1
        return node

    def _skip_name(self, end: str) -> None:
        while self.take() != end:
            pass

    def _looks_like_count(self, start: int) -> bool:
        """Whether the text from ``start`` (just after a '{') is a count such as ``3}`` or ``2,5}``."""
        rest = self.text[start:]
        close = rest.find("}")
        return close > 0 and all(c.isdigit() or c == "," for c in rest[:close]) and rest[0].isdigit()

    def quantified(self, atom: Node) -> Node:
        char = self.peek()
        if char == "*":
            low, high = 0, None
        elif char == "+":
            low, high = 1, None
        elif char == "?":
            low, high = 0, 1
        elif char == "{" and self._looks_like_count(self.pos + 1):
            low, high = self.count()
        else:
            return atom
        if char != "{":
            self.pos += 1
        if self.peek() == "?":  # lazy: the same strings
            self.pos += 1
        if self.peek() in ("*", "+", "?") or (self.peek() == "{" and self._looks_like_count(self.pos + 1)):
            raise PatternError(f"a quantifier follows a quantifier at position {self.pos}")
        for bound in (low, high):
            if bound is not None and bound > MAX_PATTERN_REPEAT:
                raise PatternError(f"the pattern repeats something {bound} times; the limit is {MAX_PATTERN_REPEAT}")
        return repetition(atom, low, high)

    def count(self) -> tuple[int, int | None]:
        self.pos += 1
        close = self.text.index("}", self.pos)
        body = self.text[self.pos:close]
        self.pos = close + 1
        low_text, _, high_text = body.partition(",")
        low = int(low_text)
        high = low if "," not in body else (int(high_text) if high_text else None)
        if high is not None and high < low:
            raise PatternError(f"the count {{{body}}} is out of order")
        return low, high

    def char_class(self) -> list[tuple[int, int]]:
        negated = self.peek() == "^"
        if negated:
            self.pos += 1
        ranges: list[tuple[int, int]] = []
        first = True
        while first or self.peek() != "]":
            first = False
            lo = self.class_atom()
            if isinstance(lo, list):
                ranges += lo
                continue
            if self.peek() == "-" and self.text[self.pos + 1:self.pos + 2] not in ("]", ""):
                self.pos += 1
                hi = self.class_atom()
                if isinstance(hi, list) or hi < lo:
                    raise PatternError("a character range is out of order")
                ranges.append((lo, hi))
            else:
                ranges.append((lo, lo))
        self.pos += 1
        return gbnf.complement(ranges) if negated else gbnf.normalise(ranges)

    def class_atom(self) -> int | list[tuple[int, int]]:
        char = self.take()
        if char != "\\":
            return ord(char)
        escaped = self.escape(in_class=True)
        if len(escaped.ranges) == 1 and escaped.ranges[0][0] == escaped.ranges[0][1]:
            return escaped.ranges[0][0]
        return list(escaped.ranges)

    def escape(self, in_class: bool) -> Chars:
        char = self.take()
        if char.lower() in _CLASS_ESCAPES:
            ranges = _CLASS_ESCAPES[char.lower()]
            return Chars(tuple(gbnf.complement(ranges) if char.isupper() else ranges))
        if char in _CHAR_ESCAPES:
            return _single(_CHAR_ESCAPES[char])
        if char == "b" and in_class:
            return _single("\b")
        if char in ("x", "u"):
            digits = 2 if char == "x" else 4
            if char == "u" and self.peek() == "{":
                close = self.text.index("}", self.pos)
                digits_text, self.pos = self.text[self.pos + 1:close], close + 1
            else:
                digits_text = self.text[self.pos:self.pos + digits]
                self.pos += digits
            try:
                return _single(chr(int(digits_text, 16)))
            except ValueError:
                raise PatternError(f"a bad \\{char} escape") from None
        if char.isdigit() or char in "bBk":
            raise PatternError("backreferences and word boundaries cannot be expressed as a grammar")
        if char.isalnum():
            raise PatternError(f"the escape \\{char} is not supported")
        return _single(char)


def _single(char: str) -> Chars:
    return Chars(((ord(char), ord(char)),))


def repetition(item: Node, low: int, high: int | None) -> Node:
    """``item{low,high}``, with an item that can match nothing made non-empty first."""
    if (low, high) == (1, 1):
        return item
    if nullable(item) and (high is None or high > 1):
        solid = without_empty(item)
        if solid is None:
            raise PatternError("the pattern repeats something that can match nothing; it is too ambiguous for a grammar")
        # Each of the `low` copies may be empty, so zero copies of the solid part is allowed.
        if isinstance(solid, Rep) and solid.high is None:
            return Rep(solid.item, 0, None)  # (x+){0,n} is just x*
        return Rep(solid, 0, high)
    return Rep(item, low, high)


# -- writing -------------------------------------------------------------------------------


def parse_pattern(pattern: str) -> Node:
    try:
        node = _Parser(pattern).parse()
    except (IndexError, ValueError) as exc:
        if isinstance(exc, PatternError):
            raise
        raise PatternError(f"the pattern is not a valid regular expression ({exc})") from None
    if size(node) > MAX_PATTERN_SIZE:
        raise PatternError(f"the pattern expands to more than {MAX_PATTERN_SIZE} grammar symbols")
    if ambiguity(node) > MAX_PATTERN_AMBIGUITY:
        raise PatternError("the pattern repeats a variable-length part a variable number of times; "
                           "it is too ambiguous for a grammar")
    return node


def to_gbnf(node: Node, define: RuleSink) -> str:
    """The GBNF expression for ``node``; repeated parts become rules through ``define``."""
    if isinstance(node, Chars):
        return gbnf.json_string_chars(list(node.ranges))
    if isinstance(node, Seq):
        return "(" + " ".join(to_gbnf(n, define) for n in node.items) + ")" if node.items else '""'
    if isinstance(node, Alt):
        return "(" + " | ".join(to_gbnf(n, define) for n in node.options) + ")"
    item = to_gbnf(node.item, define)
    if not _is_symbol(item):
        item = define("pattern-part", item)
    return "(" + gbnf.repeat(item, node.low, node.high) + ")"


def _is_symbol(expression: str) -> bool:
    # What json_string_chars and literals produce: one class or one literal, never a group.
    return expression[:1] in ('[', '"')
