"""Titles from a small model's answer: the junk the issue saw, cleaned or refused, and the
question's first words when nothing usable is left."""

from __future__ import annotations

import pytest

from inglenook.engine.chat.titles import (
    TITLE_GRAMMAR,
    TITLE_WORDS,
    clean_title,
    fallback_title,
    title_for,
    title_from,
    title_source,
)

SLEEP = "How do I stop waking up at 3am? I go to bed at eleven and sleep badly."


@pytest.mark.parametrize(("raw", "expected"), [
    # the junk titles quoted in issue 32
    ("Here's a possible title for the conversation:", ""),
    ("Here's a possible title for the conversation:\n\n\"Waking Up at 3am\"", "Waking Up at 3am"),
    ("1. 101 Tips for a Good Night's Sleep", ""),  # cut to six words, nothing of the question is left
    ("1. Stop Waking Up Early", "Stop Waking Up Early"),
    ("2) Sleep: what to do at 3am", "Sleep: what to do at 3am"),
    ("Sleeping badly is not a problem and you should wake up whenever you like to.", ""),
    # the other habits of small models
    ('Title: "Stop Waking at 3am".', "Stop Waking at 3am"),
    ("**Better Sleep Habits**", "Better Sleep Habits"),
    ("- Bed at eleven, awake at three!", "Bed at eleven, awake at three"),
    ("Sure! Here is a title: Sleep Through the Night", "Sleep Through the Night"),
    ("Certainly!\nSleep Schedule Fixes", "Sleep Schedule Fixes"),
    ("“Night Waking Explained”", "Night Waking Explained"),
    ("<|im_end|>Welcome to the chat", ""),
    ("```python\nprint('hi')\n```", ""),
    ("Gardening for Beginners", ""),  # shares no word with the question: not about it
    ("", ""),
    ("   \n  ", ""),
    ("...", ""),
])
def test_clean_title(raw: str, expected: str) -> None:
    assert clean_title(raw, SLEEP) == expected


def test_a_title_has_at_most_six_words_and_ends_on_a_word_that_carries_meaning() -> None:
    title = clean_title("Waking up at three in the early morning", SLEEP)
    assert title == "Waking up at three"  # six words cut, then "in the" dropped
    assert len(title.split()) <= TITLE_WORDS


def test_without_a_question_any_topic_is_accepted() -> None:
    assert clean_title("Gardening for Beginners") == "Gardening for Beginners"


def test_an_unusable_title_falls_back_to_the_questions_first_words() -> None:
    assert title_for("Here's a possible title for the conversation:", SLEEP) == "How do I stop waking up at 3am? I go to bed at…"
    assert title_for("Sleep Better", SLEEP) == "Sleep Better"
    assert fallback_title("Explain monads?") == "Explain monads?"
    assert fallback_title("   ") == ""


def test_the_grammar_allows_one_line_of_a_few_words_and_one_full_stop() -> None:
    lines = TITLE_GRAMMAR.strip().splitlines()
    assert lines[0] == 'root ::= word (" " word){0,7} [.!?]?'
    assert "\\n" in lines[1] and ":" in lines[1]  # no line breaks, no "Title:" preambles


def test_a_word_said_again_and_again_counts_once_and_a_cut_sentence_is_refused() -> None:
    assert clean_title("The Quill Quill Quill Quill Quill") == "The Quill"
    cats = "Why does my cat keep sneezing all day?"
    assert clean_title("Your cat's sneezing is a common cold symptom", cats) == ""
    assert title_for("Your cat's sneezing is a common cold symptom", cats) == fallback_title(cats)


PASTE = "Traceback (most recent call last):\n" + "\n".join(
    f'  File "/srv/app/orders.py", line {n}, in process\n    total = compute_total(items)' for n in range(60))
PASTED_QUESTION = PASTE + "\nKeyError: 'price'\n\nWhy does my order service crash with this KeyError?"


def test_a_long_paste_is_titled_from_its_head_and_the_question_after_it() -> None:
    source = title_source(PASTED_QUESTION)
    assert len(source) <= 1500 + 3
    assert source.startswith("Traceback (most recent call last):")
    assert source.endswith("Why does my order service crash with this KeyError?")
    assert title_source("Explain monads?") == "Explain monads?"
    assert title_source(" " * 3000 + "Why?") == "…\nWhy?"  # whitespace only around it: no error
    assert title_source("x" * 1500 + " " + "y" * 499).endswith("…\n" + "y" * 499)  # a cut on a space keeps the word
    assert title_source("x" * 1500 + " yy" + "z" * 498).endswith("…")  # a tail that is one cut word: dropped


def test_a_long_paste_falls_back_to_the_question_asked_below_it() -> None:
    assert fallback_title(PASTED_QUESTION) == "Why does my order service crash with this KeyEr…"
    assert title_for("Here's a possible title for the conversation:", PASTED_QUESTION) == fallback_title(PASTED_QUESTION)
    # A paste with nothing after it, or a long message that is all prose, keeps its first words.
    assert fallback_title(PASTE) == title_from(PASTE)
    assert fallback_title("word " * 400) == title_from("word " * 400)
