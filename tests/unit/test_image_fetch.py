"""http(s) image URLs in API requests (issue 31): the address check, and the fetch itself
against real loopback servers.

The checker is tested on its own over every refused range. The fetch's allowed path needs a
server the test can run, and the only such server is on loopback, which the real checker
refuses (as it must): those tests pass ``fetch_image`` a checker that lets exactly that one
server's port through and hands every other host and port to the real checker, so a redirect
to any other address is still judged by the real rules."""

from __future__ import annotations

import base64
import ipaddress

import pytest

from inglenook.engine import InvalidRequest
from inglenook.engine.api.shared import fetch_image, fetched_images, public_addresses, refused_reason
from inglenook.engine.base import ChatMessage, ContentPart

from ..image_server import image_server
from ..mmproj_writer import write_png


@pytest.fixture
def png(tmp_path) -> bytes:
    return write_png(tmp_path / "shot.png").read_bytes()


@pytest.mark.parametrize(("address", "reason"), [
    ("127.0.0.1", "loopback"), ("127.8.9.10", "loopback"), ("::1", "loopback"),
    ("10.1.2.3", "private"), ("172.16.0.9", "private"), ("192.168.1.1", "private"), ("fc00::1", "private"),
    ("169.254.169.254", "link-local"), ("fe80::1", "link-local"),
    ("0.0.0.0", "reserved"), ("240.0.0.1", "reserved"), ("::", "reserved"),
    ("224.0.0.1", "multicast"), ("100.64.0.1", "not public"),
    ("::ffff:127.0.0.1", "loopback"), ("::ffff:10.0.0.1", "private"), ("2002:7f00:1::", "loopback"),
])
def test_addresses_that_are_not_public_are_refused(address: str, reason: str) -> None:
    found = refused_reason(ipaddress.ip_address(address))
    assert found is not None and reason in found


@pytest.mark.parametrize("address", ["93.184.216.34", "1.1.1.1", "2606:4700:4700::1111"])
def test_public_addresses_pass(address: str) -> None:
    assert refused_reason(ipaddress.ip_address(address)) is None
    assert public_addresses(address, 443) == [ipaddress.ip_address(address)]  # a literal: no lookup


@pytest.mark.parametrize("host", ["localhost", "127.0.0.1", "[::1]", "0.0.0.0"])
def test_the_machine_itself_is_refused_by_name_or_address(host: str) -> None:
    with pytest.raises(InvalidRequest, match="public addresses only"):
        public_addresses(host.strip("[]"), 80)


def test_requests_name_image_urls_only_when_fetching_is_on(png: bytes) -> None:
    with image_server(png) as server:
        message = ChatMessage(role="user", content=[
            ContentPart(type="image_url", image_url={"url": f"{server.url}/shot.png"}),
            ContentPart(type="text", text="What is this?")])
        with pytest.raises(InvalidRequest, match="fetching image URLs is off"):
            fetched_images([message], allowed=False)
        with pytest.raises(InvalidRequest, match="loopback"):
            fetched_images([message], allowed=True)  # the real checker: loopback is never fetched
        assert server.requests == []  # neither refusal reached the server


def _only(port: int):
    """A checker that lets one loopback server through and judges everything else for real."""
    def check(host: str, at: int):
        if host == "127.0.0.1" and at == port:
            return [ipaddress.ip_address(host)]
        return public_addresses(host, at)
    return check


def test_an_allowed_url_is_fetched_into_a_data_url(png: bytes) -> None:
    with image_server(png) as server:
        message = ChatMessage(role="user", content=[
            ContentPart(type="image_url", image_url={"url": f"{server.url}/shot.png"}),
            ContentPart(type="text", text="What is this?")])
        (fetched,) = fetched_images([message], allowed=True, check=_only(server.port))
        url = fetched.content[0].image_url["url"]
        assert url.startswith("data:image/png;base64,") and base64.b64decode(url.split(",", 1)[1]) == png
        assert fetched.content[1].text == "What is this?" and server.requests == ["/shot.png"]


def test_redirects_are_checked_at_every_hop(png: bytes) -> None:
    with image_server(png) as inner, image_server(png, redirect_to=f"{inner.url}/shot.png") as outer:
        with pytest.raises(InvalidRequest, match="loopback"):
            fetch_image(f"{outer.url}/redirect", check=_only(outer.port))
        assert outer.requests == ["/redirect"] and inner.requests == []  # the second hop never left
        # A redirect to an allowed place is followed; a loop ends.
        with image_server(png, redirect_to=f"{outer.url}/shot.png") as same:
            assert fetch_image(f"{same.url}/redirect", check=lambda h, p: [ipaddress.ip_address(h)]).startswith(
                "data:image/png")
        with pytest.raises(InvalidRequest, match="redirected more than"):
            fetch_image(f"{outer.url}/loop", check=_only(outer.port))


def test_size_and_scheme_limits(png: bytes) -> None:
    with image_server(png, body_bytes=5000) as server:
        with pytest.raises(InvalidRequest, match="larger than"):
            fetch_image(f"{server.url}/big", check=_only(server.port), max_bytes=4096)
    for url in ("ftp://example.com/a.png", "file:///etc/passwd", "http://user:pw@example.com/a.png"):
        with pytest.raises(InvalidRequest):
            fetch_image(url)
