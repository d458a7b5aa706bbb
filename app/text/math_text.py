"""TeX math in answers (`$…$` or `\\(…\\)` inline, `$$…$$` or `\\[…\\]` on its own line) as
readable Unicode text.

Qt's rich text has no math typesetting, and a real TeX engine is far too heavy for a chat
window; models, though, write mostly simple formulas: Greek letters, operators, fractions,
roots, sub- and superscripts. Those map well onto Unicode (α, ≤, √, ², ₙ), set in italics
like printed math. Whatever is not understood is shown as written, never dropped.
"""

from __future__ import annotations

import re

SYMBOLS: dict[str, str] = {
    # Greek
    "alpha": "α", "beta": "β", "gamma": "γ", "delta": "δ", "epsilon": "ε", "varepsilon": "ε", "zeta": "ζ",
    "eta": "η", "theta": "θ", "vartheta": "ϑ", "iota": "ι", "kappa": "κ", "lambda": "λ", "mu": "μ", "nu": "ν",
    "xi": "ξ", "pi": "π", "rho": "ρ", "sigma": "σ", "tau": "τ", "upsilon": "υ", "phi": "φ", "varphi": "φ",
    "chi": "χ", "psi": "ψ", "omega": "ω", "Gamma": "Γ", "Delta": "Δ", "Theta": "Θ", "Lambda": "Λ", "Xi": "Ξ",
    "Pi": "Π", "Sigma": "Σ", "Phi": "Φ", "Psi": "Ψ", "Omega": "Ω",
    # operators and relations
    "times": "×", "cdot": "·", "div": "÷", "pm": "±", "mp": "∓", "leq": "≤", "le": "≤", "geq": "≥", "ge": "≥",
    "neq": "≠", "ne": "≠", "approx": "≈", "equiv": "≡", "sim": "∼", "propto": "∝", "infty": "∞",
    "sum": "∑", "prod": "∏", "int": "∫", "oint": "∮", "partial": "∂", "nabla": "∇", "in": "∈", "notin": "∉",
    "subset": "⊂", "subseteq": "⊆", "cup": "∪", "cap": "∩", "forall": "∀", "exists": "∃", "emptyset": "∅",
    "to": "→", "rightarrow": "→", "leftarrow": "←", "Rightarrow": "⇒", "Leftarrow": "⇐", "iff": "⇔",
    "leftrightarrow": "↔", "mapsto": "↦", "ldots": "…", "cdots": "⋯", "dots": "…", "circ": "∘", "degree": "°",
    "angle": "∠", "perp": "⊥", "parallel": "∥", "neg": "¬", "land": "∧", "lor": "∨", "oplus": "⊕", "otimes": "⊗",
    "quad": " ", "qquad": "  ", ",": " ", ";": " ", "!": "", " ": " ", "{": "{", "}": "}", "%": "%", "$": "$",
    "log": "log", "ln": "ln", "exp": "exp", "sin": "sin", "cos": "cos", "tan": "tan", "lim": "lim",
    "max": "max", "min": "min",
}
SUPERSCRIPTS = str.maketrans("0123456789+-=()niT", "⁰¹²³⁴⁵⁶⁷⁸⁹⁺⁻⁼⁽⁾ⁿⁱᵀ")
SUBSCRIPTS = str.maketrans("0123456789+-=()aeijknmoprstuvx", "₀₁₂₃₄₅₆₇₈₉₊₋₌₍₎ₐₑᵢⱼₖₙₘₒₚᵣₛₜᵤᵥₓ")
_SUPERSCRIPT_CHARS = set("0123456789+-=()niT")
_SUBSCRIPT_CHARS = set("0123456789+-=()aeijknmoprstuvx")
DROPPED = {"left", "right", "big", "Big", "bigg", "Bigg", "displaystyle", "limits", "nolimits"}
STYLES = {"mathbf", "mathrm", "mathit", "mathsf", "mathtt", "boldsymbol", "operatorname", "text", "textrm",
          "textbf", "mathcal", "mathbb"}

# $$…$$ first, then $…$ whose inside does not begin or end with a space and is not followed
# by a digit (so "$5 and $10" stays money).
_DISPLAY = re.compile(r"\$\$(.+?)\$\$", re.S)
_INLINE = re.compile(r"(?<![\\$\w])\$(?!\s)([^$\n]+?)(?<!\s)\$(?![\w$])")
_DISPLAY_BRACKETS = re.compile(r"\\\[(.+?)\\\]", re.S)  # \[ … \]
_INLINE_PARENS = re.compile(r"\\\((.+?)\\\)")  # \( … \)
_INLINE_CODE = re.compile(r"(`+)(.+?)\1", re.S)
_MARKDOWN_SPECIALS = re.compile(r"([\\`*_\[\]<>#|])")


def _group(tex: str, start: int) -> tuple[str, int]:
    """The argument starting at ``start``: a {…} group (nested) or one character or command."""
    while start < len(tex) and tex[start] == " ":
        start += 1
    if start >= len(tex):
        return "", start
    if tex[start] == "{":
        depth, i = 0, start
        while i < len(tex):
            depth += {"{": 1, "}": -1}.get(tex[i], 0)
            if depth == 0:
                return tex[start + 1:i], i + 1
            i += 1
        return tex[start + 1:], len(tex)
    if tex[start] == "\\":
        match = re.match(r"\\([A-Za-z]+|.)", tex[start:])
        assert match is not None
        return match.group(0), start + len(match.group(0))
    return tex[start], start + 1


def _script(text: str, table: dict[int, int], chars: set[str], mark: str) -> str:
    if text and set(text) <= chars:
        return text.translate(table)
    return f"{mark}({text})" if len(text) > 1 else f"{mark}{text}"


def tex_to_unicode(tex: str) -> str:
    """A TeX formula as Unicode text (best effort; unknown commands stay as written)."""
    out: list[str] = []
    i = 0
    while i < len(tex):
        char = tex[i]
        if char == "\\":
            match = re.match(r"\\([A-Za-z]+|.)", tex[i:])
            name = match.group(1) if match else ""
            i += len(match.group(0)) if match else 1
            if name == "frac" or name == "dfrac" or name == "tfrac":
                top, i = _group(tex, i)
                bottom, i = _group(tex, i)
                top, bottom = tex_to_unicode(top), tex_to_unicode(bottom)
                wrap = lambda s: s if len(s) <= 1 or s.isalnum() else f"({s})"  # noqa: E731
                out.append(f"{wrap(top)}⁄{wrap(bottom)}")
            elif name == "sqrt":
                body, i = _group(tex, i)
                inner = tex_to_unicode(body)
                out.append(f"√{inner}" if len(inner) <= 1 or inner.isalnum() else f"√({inner})")
            elif name in STYLES:
                body, i = _group(tex, i)
                out.append(tex_to_unicode(body) if name not in ("text", "textrm", "textbf") else body)
            elif name in DROPPED:
                continue
            elif name in SYMBOLS:
                out.append(SYMBOLS[name])
            else:
                out.append("\\" + name)
        elif char in "^_":
            body, i = _group(tex, i + 1)
            converted = tex_to_unicode(body)
            if char == "^":
                out.append(_script(converted, SUPERSCRIPTS, _SUPERSCRIPT_CHARS, "^"))
            else:
                out.append(_script(converted, SUBSCRIPTS, _SUBSCRIPT_CHARS, "_"))
        elif char in "{}":
            i += 1
        else:
            out.append(char)
            i += 1
    return re.sub(r" {2,}", " ", "".join(out)).strip()


def _escaped(text: str) -> str:
    return _MARKDOWN_SPECIALS.sub(r"\\\1", text)


def math_to_markdown(text: str) -> str:
    """Markdown prose with its TeX math turned into italic Unicode; inline code untouched."""
    if "$" not in text and "\\(" not in text and "\\[" not in text:
        return text
    pieces: list[str] = []
    last = 0
    for code in _INLINE_CODE.finditer(text):
        pieces.append(_convert(text[last:code.start()]))
        pieces.append(code.group(0))
        last = code.end()
    pieces.append(_convert(text[last:]))
    return "".join(pieces)


def _convert(prose: str) -> str:
    def display(match: re.Match[str]) -> str:
        return f"\n\n*{_escaped(tex_to_unicode(match.group(1)))}*\n\n"

    def inline(match: re.Match[str]) -> str:
        return f"*{_escaped(tex_to_unicode(match.group(1)))}*"

    prose = _DISPLAY_BRACKETS.sub(display, _DISPLAY.sub(display, prose))
    return _INLINE_PARENS.sub(inline, _INLINE.sub(inline, prose))
