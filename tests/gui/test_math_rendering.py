"""TeX math in a rendered answer reads as math: inline and display formulas in italics,
as Unicode, and a code block's dollars left alone."""

from __future__ import annotations

import pytest

from inglenook.app.widgets.markdown_view import CodeBlock, RichText

pytestmark = pytest.mark.gui


def test_an_answer_with_math_renders_it_as_unicode(qtbot, window) -> None:
    view = window.view
    widget = view.begin_answer("model")
    view.update_answer("The area is $\\pi r^2$ and\n\n$$\\frac{a}{b} \\leq \\sqrt{2}$$\n\n```sh\necho $HOME\n```")
    body = widget.body
    prose = "\n".join(w.toPlainText() for w in body.findChildren(RichText) if not isinstance(w.parent(), CodeBlock))
    assert "π r²" in prose and "a⁄b ≤ √2" in prose and "$" not in prose
    assert [block.code for block in body.code_blocks()] == ["echo $HOME"]
