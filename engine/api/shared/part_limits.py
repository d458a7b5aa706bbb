"""How many files and images one request may carry (issue 45): each file is converted in a
worker process of its own and each image is decoded and encoded by the vision model, so 2,000
five-byte file parts took 185 s and slowed every other request meanwhile. The parts are
counted before anything is converted, fetched or decoded; a request over a bound is a 400
that says the bound. Every family's parts arrive here in OpenAI's chat shape."""

from __future__ import annotations

from ...base import ChatMessage, InvalidRequest

#: Files (``file`` parts, Responses ``input_file``, Anthropic ``document``) per request.
MAX_FILE_PARTS = 20
#: Images (``image_url`` parts, Responses ``input_image``, Anthropic ``image``) per request.
MAX_IMAGE_PARTS = 16


def check_part_counts(messages: list[ChatMessage]) -> None:
    """``InvalidRequest`` when ``messages`` hold more files or images than one request may."""
    files = images = 0
    for message in messages:
        if isinstance(message.content, list):
            files += sum(1 for part in message.content if part.type == "file")
            images += sum(1 for part in message.content if part.type == "image_url")
    if files > MAX_FILE_PARTS:
        raise InvalidRequest(f"this request carries {files} files; at most {MAX_FILE_PARTS} are read per request "
                             "(send the others in later requests, or put them in a collection)", param="messages")
    if images > MAX_IMAGE_PARTS:
        raise InvalidRequest(f"this request carries {images} images; at most {MAX_IMAGE_PARTS} are read per request",
                             param="messages")
