"""TeX math in answers as Unicode: the formulas small models write, money left alone, code
untouched, and what is not understood shown as written."""

from __future__ import annotations

import pytest

from inglenook.app.text.math_text import math_to_markdown, tex_to_unicode


@pytest.mark.parametrize(("tex", "shown"), [
    (r"E = mc^2", "E = mc²"),
    (r"x_1 + x_2", "x₁ + x₂"),
    (r"\frac{a}{b}", "a⁄b"),
    (r"\frac{x+1}{2}", "(x+1)⁄2"),
    (r"\sqrt{2}", "√2"),
    (r"\sqrt{x^2 + y^2}", "√(x² + y²)"),
    (r"\alpha \leq \beta", "α ≤ β"),
    (r"\sum_{i=1}^{n} i", "∑ᵢ₌₁ⁿ i"),
    (r"e^{i\pi} + 1 = 0", "e^(iπ) + 1 = 0"),
    (r"\int_0^\infty e^{-x} dx", "∫₀^∞ e^(-x) dx"),
    (r"\left( \frac{1}{2} \right)", "( 1⁄2 )"),
    (r"\text{speed} = \frac{d}{t}", "speed = d⁄t"),
    (r"\mathbf{v} \cdot \mathbf{w}", "v · w"),
    (r"\weird{x}", r"\weirdx"),
])
def test_formulas_become_unicode(tex: str, shown: str) -> None:
    assert tex_to_unicode(tex) == shown


def test_inline_and_display_math_in_markdown() -> None:
    text = "Energy is $E = mc^2$, and\n$$a^2 + b^2 = c^2$$\nholds."
    shown = math_to_markdown(text)
    assert "*E = mc²*" in shown
    assert "\n\n*a² + b² = c²*\n\n" in shown
    assert "$" not in shown


def test_bracket_delimiters_too() -> None:
    shown = math_to_markdown(r"So \(x^2\) grows, and \[ \frac{1}{n} \to 0 \]")
    assert "*x²*" in shown and "*1⁄n → 0*" in shown


def test_money_code_and_plain_text_stay_as_they_are() -> None:
    for text in ("It costs $5 and $10.", "Prices: $3.50, not $4", "Use `echo $HOME` and `$x$`.",
                 "No math here."):
        assert math_to_markdown(text) == text


def test_markdown_characters_in_a_formula_are_escaped() -> None:
    assert math_to_markdown("$a*b_c$") == r"*a\*b\_c*"
