"""Volatile system lines: moved to the end so the prompt's start stays the same."""

from __future__ import annotations

from inglenook.engine.text.volatile_prompt import VolatileLines

INSTRUCTIONS = "\n".join(f"Rule {i}: be careful with step {i}." for i in range(30))


def system(first_line: str) -> list[dict]:
    return [{"role": "system", "content": f"{first_line}\n{INSTRUCTIONS}"}, {"role": "user", "content": "hi"}]


def test_a_nonce_header_is_moved_on_the_first_request() -> None:
    lines = VolatileLines()
    header = "x-anthropic-billing-header: cc_version=2.1.37.0d9; cc_entrypoint=cli; cch=fa690;"
    steady = lines.steady("m", system(header))
    assert steady[0]["content"] == INSTRUCTIONS
    assert steady[-1]["content"] == f"hi\n\n{header}"
    other = lines.steady("m", system(header.replace("fa690", "0aaa9")))
    assert other[0] == steady[0], "the system message is the same on every request"
    no_nonce = "x-anthropic-billing-header: cc_version=2.1.197.c23; cc_entrypoint=sdk-cli;"
    assert VolatileLines().steady("m", system(no_nonce))[0]["content"] == INSTRUCTIONS, (
        "a header line of key=value pairs is metadata even with no nonce in it this time"
    )
    digits_only = "x-anthropic-billing-header: cc_version=2.1.37.0d9; cc_entrypoint=cli; cch=03039;"
    assert VolatileLines().steady("m", system(digits_only))[0]["content"] == INSTRUCTIONS, (
        "a nonce that happens to hold no letter, in a metadata line, is still a nonce"
    )


def test_a_line_seen_changing_is_learned_and_moved_from_then_on() -> None:
    lines = VolatileLines()
    first = lines.steady("m", system("Request number: 17"))
    assert first[0]["content"].startswith("Request number: 17"), "nothing looks volatile yet"
    second = lines.steady("m", system("Request number: 18"))
    assert second[0]["content"] == INSTRUCTIONS
    assert second[-1]["content"].endswith("Request number: 18")
    third = lines.steady("m", system("Request number: 2031"))
    assert third[0] == second[0]
    assert lines.steady("other-model", system("Request number: 19"))[0]["content"].startswith("Request number"), (
        "what is learned for one model does not move lines for another"
    )


def test_content_is_never_moved() -> None:
    lines = VolatileLines()
    colours = "You are a designer.\nUse plain words.\nBe brief.\nThe brand colour is #ff00aa1 and the logo hash is 3fa9c2e1."
    messages = [{"role": "system", "content": colours}, {"role": "user", "content": "hi"}]
    assert lines.steady("m", messages) == messages, "a hex run below the first lines is content"
    different = [{"role": "system", "content": "Another prompt entirely.\nWith other rules."}, {"role": "user", "content": "x"}]
    assert lines.steady("m", different) == different
    alone = [{"role": "system", "content": "cch=fa690"}, {"role": "user", "content": "hi"}]
    assert lines.steady("m", alone) == alone, "a system message is never emptied"
    assert lines.steady("m", [{"role": "user", "content": "cch=fa690"}])[0]["content"] == "cch=fa690"


def test_many_changed_lines_mean_a_different_prompt_not_a_volatile_one() -> None:
    lines = VolatileLines()
    a = "\n".join(f"line {i} alpha" for i in range(6))
    b = "\n".join(f"line {i} beta" for i in range(6))
    lines.steady("m", [{"role": "system", "content": a}, {"role": "user", "content": "hi"}])
    moved = lines.steady("m", [{"role": "system", "content": b}, {"role": "user", "content": "hi"}])
    assert moved[0]["content"] == b
