"""Keep the prompt prefix steady when a client changes one line near its top every request.

The prefix cache reuses the longest common start of two prompts, so a single line that
changes per request at the top of a system prompt (Claude Code's attribution header with a
per-request nonce, a request id, a timestamp) makes every turn read the whole prompt again:
tens of thousands of tokens for an agent. Such lines are moved from the system message to
the end of the conversation (appended to the last message), where they change nothing
that follows them. The model still sees every line; only their place changes.

A system line is volatile when either
- it is seen to change: two system prompts for the same model, a moment apart, are equal
  except for one or two short lines at the same place; the stable start of such a line (up
  to where the two versions differ) is remembered, and later lines that start the same way
  are volatile from then on; or
- it looks like a nonce: one of the first three lines, short, holding a request-unique token (a UUID, a long hex
  or base64 run mixing letters and digits, an epoch time, a timestamp with seconds). This
  catches the first request of a session, before anything was seen to change — which is
  what lets the second turn find the first one's prompt in the cache.
"""

from __future__ import annotations

import logging
import re
import threading
from collections import OrderedDict, deque
from typing import Any

log = logging.getLogger(__name__)

MAX_VOLATILE_LINE = 300  # characters; longer lines are content, not a header
MAX_CHANGED_LINES = 2  # more changed lines than this between two prompts is a different prompt
MIN_STABLE_START = 8  # characters a learned line must share before the part that changes
RECENT_PROMPTS = 8  # system prompts remembered per model
MAX_LEARNED = 64  # learned line starts per model
NONCE_LINES = 3  # only the system message's first lines are judged by their looks

_NONCE = re.compile(
    r"[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}"  # UUID
    r"|\b(?=[0-9a-f]*[a-f])(?=[0-9a-f]*[0-9])[0-9a-f]{5,}\b"  # hex nonce (cch=fa690)
    r"|\b(?=[A-Za-z0-9_-]*[0-9])(?=[A-Za-z0-9_-]*[a-z])(?=[A-Za-z0-9_-]*[A-Z])[A-Za-z0-9_-]{20,}\b"  # base64 id
    r"|\b1[6-9]\d{8}(?:\d{3}){0,3}\b"  # epoch seconds to nanoseconds (2020s–2030s)
    r"|\d{4}-\d{2}-\d{2}[T ]\d{2}:\d{2}:\d{2}"  # timestamp with seconds
)


_PAIR = re.compile(r"([A-Za-z_][\w-]*)=([^;,\s]+)")
_HEXISH = re.compile(r"[0-9a-fA-F]{5,}")
_HEADER_LINE = re.compile(r"[A-Za-z][\w-]*:\s*(?:[A-Za-z_][\w-]*=[^;\s]*;\s*){2,}(?:[A-Za-z_][\w-]*=[^;\s]*)?")


class VolatileLines:
    """What has been learned about volatile system lines, per model. Thread-safe."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._recent: dict[str, deque[tuple[str, ...]]] = {}
        self._learned: dict[str, OrderedDict[str, None]] = {}

    def steady(self, model_id: str, messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
        """``messages`` with the system message's volatile lines moved to the end."""
        if len(messages) < 2 or messages[0].get("role") != "system" or not isinstance(messages[0].get("content"), str):
            return messages
        lines = tuple(messages[0]["content"].split("\n"))
        with self._lock:
            self._learn(model_id, lines)
            learned = list(self._learned.get(model_id, ()))
        moved = [i for i, line in enumerate(lines) if _volatile(line, learned, top=i < NONCE_LINES)]
        if not moved or len(moved) == len(lines):
            return messages
        kept = "\n".join(line for i, line in enumerate(lines) if i not in moved)
        tail = "\n".join(lines[i] for i in moved)
        log.debug("moved %d volatile system line(s) to the end of the prompt", len(moved))
        last = messages[-1]
        if not isinstance(last.get("content"), str):
            return messages
        return [{**messages[0], "content": kept}, *messages[1:-1], {**last, "content": f"{last['content']}\n\n{tail}"}]

    def _learn(self, model_id: str, lines: tuple[str, ...]) -> None:
        recent = self._recent.setdefault(model_id, deque(maxlen=RECENT_PROMPTS))
        learned = self._learned.setdefault(model_id, OrderedDict())
        for earlier in recent:
            if len(earlier) != len(lines) or earlier == lines:
                continue
            changed = [i for i, (a, b) in enumerate(zip(earlier, lines)) if a != b]
            if len(changed) > MAX_CHANGED_LINES or len(changed) * 4 > len(lines):
                continue
            for i in changed:
                # Back to a boundary: "counter: 17" and "counter: 18" share "counter: ", not "counter: 1".
                start = _common_start(earlier[i], lines[i]).rstrip("0123456789abcdefABCDEF")
                if len(start) >= MIN_STABLE_START and len(lines[i]) <= MAX_VOLATILE_LINE:
                    learned[start] = None
                    learned.move_to_end(start)
            while len(learned) > MAX_LEARNED:
                learned.popitem(last=False)
        if lines not in recent:
            recent.append(lines)

    def clear(self) -> None:
        with self._lock:
            self._recent.clear()
            self._learned.clear()


def _volatile(line: str, learned: list[str], top: bool) -> bool:
    if not line.strip() or len(line) > MAX_VOLATILE_LINE:
        return False
    if any(line.startswith(start) for start in learned):
        return True
    # Headers sit at the top; further down a hex run is more likely content (a colour, a hash).
    return top and (_NONCE.search(line) is not None or _metadata_nonce(line))


def _metadata_nonce(line: str) -> bool:
    """A metadata line: a header of ``key=value;`` pairs (``x-client-header: v=1.2.c23; e=cli;``),
    or pairs where a value is a bare hex or digit run (a nonce even when this request's
    happens to hold no letter). Metadata for the client's servers, not instructions."""
    if _HEADER_LINE.fullmatch(line.strip()):
        return True
    pairs = _PAIR.findall(line)
    return len(pairs) >= 2 and any(_HEXISH.fullmatch(value) for _, value in pairs)


def _common_start(a: str, b: str) -> str:
    n = 0
    for x, y in zip(a, b):
        if x != y:
            break
        n += 1
    return a[:n]


# One memory for the process: every API front end (chat completions, Responses, Messages)
# builds its prompt through chat_plan, which uses it.
VOLATILE_LINES = VolatileLines()
