"""``item_reference`` inputs of the Responses API on a real server: a reference to a stored item
is read as that item (an answer, or an input listed by input_items), an unknown one is a 400."""

from __future__ import annotations

import openai
import pytest

from .conftest import STARTER

pytestmark = pytest.mark.api


def test_a_reference_to_a_stored_answer_is_that_answer_in_the_prompt(client: openai.OpenAI) -> None:
    first = client.responses.create(model=STARTER, input="Name a colour.", max_output_tokens=4, temperature=0)
    answer_id = first.output[0].id
    inputs = client.responses.input_items.list(first.id)
    question_id = inputs.data[0].id
    plain = client.responses.create(model=STARTER, max_output_tokens=1, temperature=0, input=[
        {"role": "user", "content": "Name a colour."},
        {"role": "assistant", "content": first.output_text},
        {"role": "user", "content": "Another?"},
    ])
    referenced = client.responses.create(model=STARTER, max_output_tokens=1, temperature=0, input=[
        {"type": "item_reference", "id": question_id},
        {"id": answer_id},  # the short form: an id alone
        {"role": "user", "content": "Another?"},
    ])
    # The same conversation either way: the same prompt, token for token.
    assert referenced.usage.input_tokens == plain.usage.input_tokens
    stored = client.responses.input_items.list(referenced.id, order="asc")
    assert [item.type for item in stored.data] == ["message", "message", "message"]
    assert stored.data[1].role == "assistant"


def test_an_unknown_reference_is_a_400_naming_it(client: openai.OpenAI) -> None:
    with pytest.raises(openai.BadRequestError) as caught:
        client.responses.create(model=STARTER, max_output_tokens=1, input=[
            {"role": "user", "content": "Hi"}, {"type": "item_reference", "id": "msg_never_stored"}])
    error = caught.value.body
    assert isinstance(error, dict) and "msg_never_stored" in error["message"] and error["param"] == "input"
