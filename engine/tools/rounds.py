"""What every loop of model → tool calls → results shares, in a chat (``chat/tool_turn``) and
in an API response (``api/responses/mcp_rounds``)."""

from __future__ import annotations

#: Rounds of model → calls → results in one turn or response, unless the caller says otherwise.
DEFAULT_MAX_ROUNDS = 5
#: The last round must answer in words: its prompt offers the same tools (so it is a
#: prefix-cache hit like the others) and this grammar only keeps the answer from opening a
#: call (JSON, a list or a tag), which tiny models otherwise write again and again.
ANSWER_ONLY_GRAMMAR = 'root ::= [^{<\\[\\x00-\\x20] [^\\x00]*'
