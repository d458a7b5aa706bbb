"""http(s) image URLs in API requests, fetched only when the person allowed it.

Off by default (``Settings.api_fetch_image_urls``): a server that fetches what a request
names can be pointed at the machine's own services or the local network (SSRF). When it is
on, a URL is fetched only from public addresses: its host is resolved and *every* address is
checked (loopback, private, link-local, shared, reserved, multicast and unspecified ranges
are refused, IPv4 inside IPv6 too); the connection goes to the address that was checked (no
second lookup a DNS server could answer differently), with the name kept for the Host header
and TLS; redirects are followed by hand, a few at most, each checked the same way. The body
is read up to ``MAX_IMAGE_BYTES`` within a deadline. What comes back replaces the URL as a
``data:`` URL, which the ordinary image path decodes and checks.

Every refusal is ``InvalidRequest`` (a 400 in each API family's own shape).
"""

from __future__ import annotations

import base64
import ipaddress
import logging
import socket
import time
from collections.abc import Callable
from typing import Any
from urllib.parse import urljoin, urlsplit

from ...base import MAX_IMAGE_BYTES, ChatMessage, ContentPart, InvalidRequest

log = logging.getLogger(__name__)

FETCH_TIMEOUT_S = 10.0  # the whole fetch of one image, redirects included
MAX_REDIRECTS = 3
MAX_URL_CHARS = 2048
IMAGE_TYPES = ("image/png", "image/jpeg", "image/webp", "image/gif")

Address = ipaddress.IPv4Address | ipaddress.IPv6Address
# (host, port) -> the addresses to connect to, or InvalidRequest: the resolver and checker.
Checker = Callable[[str, int], list[Address]]


def refused_reason(address: Address) -> str | None:
    """Why ``address`` may not be fetched from; None for a public address."""
    if isinstance(address, ipaddress.IPv6Address):
        mapped = address.ipv4_mapped or address.sixtofour
        if mapped is not None:
            return refused_reason(mapped)
    if address.is_loopback:
        return "a loopback address"
    if address.is_unspecified or address.is_reserved:  # (Python counts 0.0.0.0 as private too)
        return "a reserved address"
    if address.is_link_local:
        return "a link-local address"
    if address.is_multicast:
        return "a multicast address"
    if address.is_private:
        return "a private address"
    if not address.is_global:  # shared address space (100.64/10), benchmarking and the like
        return "an address that is not public"
    return None


def public_addresses(host: str, port: int) -> list[Address]:
    """Resolve ``host`` and check every address it has; ``InvalidRequest`` when any is not
    public (a name with one private address among public ones is refused: which one a
    connection would use is not ours to choose)."""
    try:
        infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    except (socket.gaierror, UnicodeError, OSError) as exc:
        raise InvalidRequest(f"the image URL's host {host!r} could not be resolved", param="messages") from exc
    addresses: list[Address] = []
    for info in infos:
        address = ipaddress.ip_address(str(info[4][0]).split("%", 1)[0])
        reason = refused_reason(address)
        if reason is not None:
            raise InvalidRequest(f"the image URL's host {host!r} is {reason} ({address}); images are fetched from "
                                 "public addresses only", param="messages")
        if address not in addresses:
            addresses.append(address)
    if not addresses:
        raise InvalidRequest(f"the image URL's host {host!r} has no address", param="messages")
    return addresses


def fetch_image(url: str, check: Checker = public_addresses, timeout_s: float = FETCH_TIMEOUT_S,
                max_bytes: int = MAX_IMAGE_BYTES) -> str:
    """The image at ``url`` as a ``data:`` URL. ``check`` resolves and vets each hop's host
    (the real checker everywhere but in tests of the fetch itself)."""
    import httpx  # noqa: PLC0415 — loaded only when a request names an image URL

    deadline = time.monotonic() + timeout_s
    current = url
    for _hop in range(MAX_REDIRECTS + 1):
        parts = urlsplit(current)
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise InvalidRequest(f"image URLs must be http(s) URLs with a host, not {current[:80]!r}",
                                 param="messages")
        if parts.username or parts.password:
            raise InvalidRequest("image URLs may not carry a user name or password", param="messages")
        port = parts.port or (443 if parts.scheme == "https" else 80)
        address = check(parts.hostname, port)[0]
        shown = f"[{address}]" if address.version == 6 else str(address)
        target = parts._replace(netloc=f"{shown}:{port}").geturl()
        host_header = parts.hostname if parts.port is None else f"{parts.hostname}:{parts.port}"
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            raise InvalidRequest(f"fetching the image took longer than {timeout_s:g} s", param="messages")
        try:
            with httpx.Client(timeout=remaining, follow_redirects=False, trust_env=False) as client:
                request = client.build_request("GET", target, headers={"Host": host_header, "Accept": "image/*"},
                                               extensions={"sni_hostname": parts.hostname})
                response = client.send(request, stream=True)
                try:
                    if response.is_redirect:
                        location = response.headers.get("location", "")
                        if not location:
                            raise InvalidRequest("the image URL redirected nowhere", param="messages")
                        current = urljoin(current, location)
                        continue
                    if response.status_code != 200:
                        raise InvalidRequest(f"fetching the image answered HTTP {response.status_code}",
                                             param="messages")
                    return _data_url(response, max_bytes, deadline, timeout_s)
                finally:
                    response.close()
        except httpx.HTTPError as exc:
            raise InvalidRequest(f"fetching the image failed: {type(exc).__name__}", param="messages") from exc
    raise InvalidRequest(f"the image URL redirected more than {MAX_REDIRECTS} times", param="messages")


def _data_url(response: Any, max_bytes: int, deadline: float, timeout_s: float) -> str:
    declared = response.headers.get("content-length")
    if declared and declared.isdigit() and int(declared) > max_bytes:
        raise InvalidRequest(f"the image is larger than the {max_bytes // (1024 * 1024)} MB an image may be",
                             param="messages")
    body = bytearray()
    for chunk in response.iter_bytes():
        body += chunk
        if len(body) > max_bytes:
            raise InvalidRequest(f"the image is larger than the {max_bytes // (1024 * 1024)} MB an image may be",
                                 param="messages")
        if time.monotonic() > deadline:
            raise InvalidRequest(f"fetching the image took longer than {timeout_s:g} s", param="messages")
    media = response.headers.get("content-type", "").split(";", 1)[0].strip().lower()
    media = media if media in IMAGE_TYPES else "application/octet-stream"  # the decoder sniffs the bytes
    return f"data:{media};base64," + base64.b64encode(bytes(body)).decode("ascii")


def is_web_url(url: object) -> bool:
    return isinstance(url, str) and url[:8].lower().startswith(("http://", "https://"))


def fetched_images(messages: list[ChatMessage], allowed: bool, check: Checker = public_addresses) -> list[ChatMessage]:
    """``messages`` with each http(s) ``image_url`` fetched into a ``data:`` URL when
    ``allowed``; refused with a 400 that says how to allow it when not."""
    out: list[ChatMessage] = []
    for index, message in enumerate(messages):
        content = message.content
        if not isinstance(content, list) or not any(
                p.type == "image_url" and is_web_url(_url_of(p)) for p in content):
            out.append(message)
            continue
        parts: list[ContentPart] = []
        for part in content:
            url = _url_of(part) if part.type == "image_url" else None
            if not is_web_url(url):
                parts.append(part)
                continue
            assert isinstance(url, str)
            if not allowed:
                raise InvalidRequest(f"messages[{index}] names an image by URL; fetching image URLs is off on this "
                                     "server (send the image as a base64 data: URL, or turn on "
                                     "api_fetch_image_urls in its settings)", param="messages")
            if len(url) > MAX_URL_CHARS:
                raise InvalidRequest(f"image URLs may be at most {MAX_URL_CHARS} characters", param="messages")
            log.info("fetching an image for a request from %s", urlsplit(url).hostname)
            parts.append(part.model_copy(update={"image_url": {"url": fetch_image(url, check)}}))
        out.append(message.model_copy(update={"content": parts}))
    return out


def _url_of(part: ContentPart) -> object:
    return part.image_url.get("url") if isinstance(part.image_url, dict) else part.image_url
