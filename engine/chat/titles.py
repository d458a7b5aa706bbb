"""A conversation's title: at first its question, cut to fit the sidebar; later a small model's
title, asked for with a constrained prompt and cleaned, or the question's first words when the
model's answer is not a usable title.

Small models answer "Write a title" with preambles ("Here's a possible title for the
conversation:"), numbered lists ("1. Sleep tips"), quotes and Markdown, or a whole sentence.
The prompt asks for the title alone and a grammar keeps the answer to one line of a few words
(no colons, quotes or line breaks); ``clean_title`` then strips what is left of those habits,
cuts to ``TITLE_WORDS`` words and refuses what is still not a title, and ``title_for`` falls
back to the question.
"""

from __future__ import annotations

import re

TITLE_LENGTH = 48
TITLE_WORDS = 6
# A title is written from at most this much of the first message. A longer one is usually a
# paste (notes, a log, code) with the person's question after it, so the model reads its
# head and its tail, and the question's own words are what a failed title falls back to.
SOURCE_CHARS = 1500
SOURCE_HEAD_CHARS = 1000
QUESTION_CHARS = 240  # a last paragraph this short, after a long paste, is the question

TITLE_PROMPT = ("Write a short title, two to six words, for the message below. "
                "Reply with the title only.\n\nMessage: {text}\n\nTitle:")

# One line of words without quotes, Markdown marks or colons (so a preamble cannot end with ":"
# and go on to a second line), then at most one full stop, after which only the end may come.
# Two words more than a title may have (cut by ``clean_title``): at the cap the grammar leaves
# the model only letters and it glues its next word onto the last, so the cap sits past the cut.
TITLE_GRAMMAR = (
    'root ::= word (" " word){0,' + str(TITLE_WORDS + 1) + "} [.!?]?\n"
    'word ::= [^ \\t\\n\\r"*#:`,;()\\[\\]{}<>.!?]+\n'
)
# Words a cut title should not end on ("How to sleep better at" → "How to sleep better"), and
# words too common to show that a title is about the question.
_FILLER = frozenset(
    "a an the and or but of in on at to for with by from as is are was be it its this that your my "
    "vs versus how what why when where which who can do does i you we".split()
)

# A title cut short that holds one of these was a sentence, and ends in the middle of its phrase.
_COPULAS = frozenset("is are was were be been".split())
_LIST_MARKER = re.compile(r"^(?:\(?\d{1,3}[.)]|[-*•·]|#{1,6})\s+")
_LABEL = re.compile(r"^(?:title|conversation title|suggested title|topic)\s*[:\-–—]\s*", re.IGNORECASE)
_QUOTES_AND_MARKS = " \t\"'*_`“”‘’«»"
_TRAILING = ".,;:!?…-–—"
# Lines that talk about the title instead of being one.
_PREAMBLE = re.compile(
    r"^(?:sure|certainly|okay|ok|of course|absolutely|great)\b"
    r"|\b(?:here(?:'s|’s| is| are)|possible|suggested|proposed|potential)\b[^.]*\btitles?\b"
    r"|\b(?:titles?|topics?) (?:for|of) (?:the|this|a|your) (?:conversation|message|chat|discussion)\b"
    r"|^(?:the )?title\b",
    re.IGNORECASE,
)
_TEMPLATE_DEBRIS = re.compile(r"<\|?[a-z_]+\|?>|\[/?INST\]|<start_of_turn>|<end_of_turn>", re.IGNORECASE)


def title_from(text: str) -> str:
    """The whole first message on one line, cut to ``TITLE_LENGTH`` characters: the title a
    new conversation gets at once."""
    line = " ".join(text.split())
    return line if len(line) <= TITLE_LENGTH else line[: TITLE_LENGTH - 1].rstrip() + "…"


def title_source(text: str) -> str:
    """What the title model reads of the first message: all of it when short, else its head
    and its tail (where a question after a paste is), cut on whitespace."""
    if len(text) <= SOURCE_CHARS:
        return text
    head = text[:SOURCE_HEAD_CHARS].rsplit(None, 1)[0] if text[:SOURCE_HEAD_CHARS].strip() else ""
    tail = text[-(SOURCE_CHARS - SOURCE_HEAD_CHARS):]
    if not tail[:1].isspace():  # cut inside a word: drop its end
        tail = tail.split(None, 1)[-1] if len(tail.split(None, 1)) > 1 else ""
    tail = tail.strip()
    return f"{head}\n…\n{tail}".strip()


def asked_after_paste(text: str) -> str:
    """The short last paragraph of a long message (the question after a paste), or ""."""
    if len(text) <= SOURCE_CHARS:
        return ""
    paragraphs = [p.strip() for p in re.split(r"\n\s*\n", text.strip()) if p.strip()]
    last = paragraphs[-1] if len(paragraphs) > 1 else ""
    return last if len(last) <= QUESTION_CHARS and any(c.isalpha() for c in last) else ""


def fallback_title(question: str) -> str:
    """The question's first words (the title the conversation got when it began), or, after
    a long paste, the words of the question asked below it."""
    return title_from(asked_after_paste(question) or question)


def _strip(line: str) -> str:
    previous = None
    while line != previous:  # markers and quotes nest: '1. "**Sleep**".' needs several passes
        previous = line
        line = line.strip(_QUOTES_AND_MARKS)
        line = _LIST_MARKER.sub("", line)
        line = _LABEL.sub("", line)
        line = line.rstrip(_TRAILING)
    return line


def _stems(text: str) -> set[str]:
    words = re.findall(r"\w+", text.lower())
    return {word[:4] for word in words if word not in _FILLER and len(word) > 1}


def _without_repeats(title: str) -> str:
    """A word the model said again and again once: "The Quill Quill Quill" → "The Quill"."""
    words: list[str] = []
    for word in title.split():
        if not words or word.lower().strip(_TRAILING) != words[-1].lower().strip(_TRAILING):
            words.append(word)
    return " ".join(words)


def _cut(title: str) -> str:
    """At most ``TITLE_WORDS`` words, not ending on a filler word."""
    words = title.split()[:TITLE_WORDS]
    while len(words) > 1 and words[-1].lower() in _FILLER:
        words.pop()
    return " ".join(words).rstrip(_TRAILING)


def clean_title(raw: str, question: str | None = None) -> str:
    """The model's answer as a title, or "" when it holds none.

    The first line that is not a preamble, without list markers, a "Title:" label, quotes,
    Markdown or trailing punctuation, cut to ``TITLE_WORDS`` words. Refused when it runs past
    ``TITLE_WORDS`` + 2 words (a sentence, not a title), still talks about titles, carries
    chat-template debris or code, or (given the ``question``) shares no word with it.
    """
    for line in raw.splitlines():
        line = " ".join(line.split())
        if not line:
            continue
        if _TEMPLATE_DEBRIS.search(line) or line.startswith("```"):
            return ""  # template tokens, or the model answered the question with code
        label_then_title = _LABEL.match(line.lstrip(_QUOTES_AND_MARKS))
        if label_then_title is None and (_PREAMBLE.search(line) or line.endswith(":")):
            before, colon, after = line.rpartition(":")
            if not colon or not after.strip():
                continue  # "Here's a possible title:" — the title, if any, is on a later line
            line = after  # "Sure! Here is a title: Sleep Better Tonight"
        title = _strip(line)
        if not title:
            continue
        if len(title.split()) > TITLE_WORDS + 2 or _PREAMBLE.search(title) or not any(c.isalnum() for c in title):
            return ""
        title = _without_repeats(title)
        words = title.lower().split()
        if len(words) > TITLE_WORDS and _COPULAS & set(words[:TITLE_WORDS]):
            return ""  # a sentence cut at six words ends mid-phrase ("… is a common"): the question's words read better
        title = _cut(title)
        if question is not None and _stems(question) and not _stems(title) & _stems(question):
            return ""  # about something else: the model answered, or made something up
        return title_from(title)
    return ""


def title_for(raw: str, question: str) -> str:
    """The model's title when it is usable, else the question's first words."""
    return clean_title(raw, question) or fallback_title(question)
