"""What models read and write as text: chat templates (sandboxed), grammars for JSON and
regexes, tool calls and reasoning found in answers, streaming text, volatile prompt lines.

May import: base.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..base import lazy_door

# Which module defines each name other packages (or the front door) use. Keep in step with
# the TYPE_CHECKING block below, which is what type checkers read (a test compares them).
_EXPORTS: dict[str, tuple[str, ...]] = {
    "answer_split": ("AnswerPiece", "AnswerSplitter", "split_answer"),
    "chat_template": ("ChatTemplate",),
    "json_grammar": ("JSON_OBJECT_GRAMMAR", "grammar_for_schema"),
    "partial_json": ("closed_object",),
    "reasoning": ("REASONING_MARKERS", "ReasoningSplitter", "Split", "split_whole"),
    "special_split": ("PieceCutter",),
    "textstream": ("TextStream", "longest_partial_match"),
    "tool_call_parser": ("ArgumentsDelta", "CallDone", "CallStarted", "PRESERVED_MARKERS"),
    "tool_calls": ("TemplateAbilities", "ToolCallFilter", "ToolPlan", "engine_messages", "plan_tools"),
    "volatile_prompt": ("VOLATILE_LINES",),
}

__all__, __getattr__, __dir__ = lazy_door(__name__, _EXPORTS)

if TYPE_CHECKING:
    from .answer_split import (
        AnswerPiece as AnswerPiece, AnswerSplitter as AnswerSplitter, split_answer as split_answer,
    )
    from .chat_template import ChatTemplate as ChatTemplate
    from .json_grammar import (
        JSON_OBJECT_GRAMMAR as JSON_OBJECT_GRAMMAR, grammar_for_schema as grammar_for_schema,
    )
    from .partial_json import closed_object as closed_object
    from .reasoning import (
        REASONING_MARKERS as REASONING_MARKERS, ReasoningSplitter as ReasoningSplitter, Split as Split,
        split_whole as split_whole,
    )
    from .special_split import PieceCutter as PieceCutter
    from .textstream import TextStream as TextStream, longest_partial_match as longest_partial_match
    from .tool_call_parser import (
        PRESERVED_MARKERS as PRESERVED_MARKERS, ArgumentsDelta as ArgumentsDelta, CallDone as CallDone,
        CallStarted as CallStarted,
    )
    from .tool_calls import (
        TemplateAbilities as TemplateAbilities, ToolCallFilter as ToolCallFilter, ToolPlan as ToolPlan,
        engine_messages as engine_messages, plan_tools as plan_tools,
    )
    from .volatile_prompt import VOLATILE_LINES as VOLATILE_LINES
