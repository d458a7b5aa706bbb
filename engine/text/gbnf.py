"""Writing GBNF (llama.cpp's grammar format): literals, character sets, bounded repetition.

Text inside a JSON string is written as JSON encodes it, so every helper here that
produces string content takes code points and emits the JSON-escaped form: a grammar that
lets a model write a raw newline or a bare quote inside a string would produce invalid JSON.
"""

from __future__ import annotations

import json

MAX_CODE_POINT = 0x10FFFF
# Characters JSON must escape inside a string, and DEL, which llama.cpp's converter also
# keeps out of raw string text.
_MUST_ESCAPE = [(0x00, 0x1F), (0x22, 0x22), (0x5C, 0x5C), (0x7F, 0x7F)]
# Longest {m,n} written as such. llama.cpp expands a repetition into n rules and refuses
# more than 2000; longer counts are decomposed into blocks (see `repeat`).
MAX_DIRECT_REPEAT = 1000
REPEAT_BLOCK = 100

Ranges = list[tuple[int, int]]


def gbnf_char(code_point: int) -> str:
    """One character as GBNF writes it inside a literal or a character class."""
    char = chr(code_point)
    if char.isascii() and (char.isalnum() or char in " !#$%&'()*+,./:;<=>?@_`{|}~"):
        return char
    if code_point <= 0xFF:
        return f"\\x{code_point:02X}"
    if code_point <= 0xFFFF:
        return f"\\u{code_point:04X}"
    return f"\\U{code_point:08X}"


def literal(text: str) -> str:
    """A GBNF literal matching ``text`` exactly (no JSON encoding)."""
    return '"' + "".join(gbnf_char(ord(c)) for c in text) + '"'


def json_literal(value: object) -> str:
    """A GBNF literal matching ``value`` written as compact JSON."""
    return literal(json.dumps(value, ensure_ascii=False, separators=(",", ":")))


def normalise(ranges: Ranges) -> Ranges:
    merged: Ranges = []
    for lo, hi in sorted(ranges):
        if merged and lo <= merged[-1][1] + 1:
            merged[-1] = (merged[-1][0], max(merged[-1][1], hi))
        else:
            merged.append((lo, hi))
    return merged


def complement(ranges: Ranges) -> Ranges:
    out: Ranges = []
    start = 0
    for lo, hi in normalise(ranges):
        if lo > start:
            out.append((start, lo - 1))
        start = hi + 1
    if start <= MAX_CODE_POINT:
        out.append((start, MAX_CODE_POINT))
    return out


def subtract(ranges: Ranges, removed: Ranges) -> Ranges:
    return intersect(ranges, complement(removed))


def intersect(a: Ranges, b: Ranges) -> Ranges:
    out: Ranges = []
    for alo, ahi in normalise(a):
        for blo, bhi in normalise(b):
            lo, hi = max(alo, blo), min(ahi, bhi)
            if lo <= hi:
                out.append((lo, hi))
    return normalise(out)


def char_class(ranges: Ranges) -> str:
    """A GBNF character class for raw ``ranges`` (no JSON encoding)."""
    parts = [gbnf_char(lo) if lo == hi else f"{gbnf_char(lo)}-{gbnf_char(hi)}" for lo, hi in normalise(ranges)]
    return "[" + "".join(parts) + "]"


def json_string_chars(ranges: Ranges) -> str:
    """GBNF matching one character from ``ranges`` as it appears inside a JSON string:
    plain characters raw, the ones JSON escapes (quote, backslash, controls) escaped."""
    ranges = normalise(ranges)
    plain = subtract(ranges, _MUST_ESCAPE)
    escaped = [c for lo, hi in intersect(ranges, _MUST_ESCAPE) for c in range(lo, hi + 1)]
    options = [char_class(plain)] if plain else []
    options += [literal(json.dumps(chr(c))[1:-1]) for c in escaped]
    if not options:
        raise ValueError("the character set is empty")
    return options[0] if len(options) == 1 else "(" + " | ".join(options) + ")"


def repeat(item: str, low: int, high: int | None) -> str:
    """``item`` repeated between ``low`` and ``high`` times (None: unbounded).

    ``item`` must be a single symbol (a rule name, a literal or a character class) so
    llama.cpp's expansion stays one rule per count. Counts above MAX_DIRECT_REPEAT are
    written as blocks of REPEAT_BLOCK: any length up to q·B is ``block{0,q-1} item{0,B}``
    and the rest ``block{q} item{0,r}``, so the grammar grows with high/B + B, not high.
    """
    if high is not None and high < low:
        raise ValueError("the maximum count is below the minimum")
    if high is None:
        return f"{_exactly(item, low)} {item}*".strip() if low > MAX_DIRECT_REPEAT else _count(item, low, None)
    if high <= MAX_DIRECT_REPEAT:
        return _count(item, low, high)
    fixed = _exactly(item, low)
    rest = high - low
    if rest <= MAX_DIRECT_REPEAT:
        return f"{fixed} {_count(item, 0, rest)}".strip()
    block = f"({item}{{{REPEAT_BLOCK}}})"
    blocks, remainder = divmod(rest, REPEAT_BLOCK)
    if blocks - 1 > MAX_DIRECT_REPEAT:
        raise ValueError(f"a repetition of {high} is too long for a grammar")
    upto = f"{_count(block, 0, blocks - 1)} {_count(item, 0, REPEAT_BLOCK)}"
    tail = f"{block}{{{blocks}}} {_count(item, 0, remainder)}".strip()
    return f"{fixed} ({upto} | {tail})".strip()


def _exactly(item: str, count: int) -> str:
    if count <= MAX_DIRECT_REPEAT:
        return _count(item, count, count)
    blocks, remainder = divmod(count, REPEAT_BLOCK)
    if blocks > MAX_DIRECT_REPEAT:
        raise ValueError(f"a repetition of {count} is too long for a grammar")
    block = f"({item}{{{REPEAT_BLOCK}}})"
    return f"{block}{{{blocks}}} {_count(item, remainder, remainder)}".strip()


def _count(item: str, low: int, high: int | None) -> str:
    if high == low:
        return "" if low == 0 else item if low == 1 else f"{item}{{{low}}}"
    if high is None:
        return {0: f"{item}*", 1: f"{item}+"}.get(low, f"{item}{{{low},}}")
    if (low, high) == (0, 1):
        return f"{item}?"
    return f"{item}{{{low},{high}}}"
