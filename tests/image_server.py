"""A real HTTP server on loopback for the image-URL tests: serves a PNG, redirects, and
counts the requests it was sent (a refused fetch must not reach it)."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


class ImageServer:
    def __init__(self, png: bytes, redirect_to: str | None = None, body_bytes: int | None = None) -> None:
        self.png = png
        self.redirect_to = redirect_to  # /redirect answers 302 to this
        self.body_bytes = body_bytes  # /big sends this many bytes
        self.requests: list[str] = []
        server = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                server.requests.append(self.path)
                if self.path == "/redirect" and server.redirect_to:
                    self.send_response(302)
                    self.send_header("Location", server.redirect_to)
                    self.end_headers()
                    return
                if self.path == "/loop":
                    self.send_response(302)
                    self.send_header("Location", "/loop")
                    self.end_headers()
                    return
                body = server.png if self.path != "/big" else b"\0" * (server.body_bytes or 0)
                self.send_response(200)
                self.send_header("Content-Type", "image/png")
                if self.path != "/big":
                    self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *_args: object) -> None:
                pass

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.port = self.httpd.server_address[1]
        self.url = f"http://127.0.0.1:{self.port}"


@contextmanager
def image_server(png: bytes, **options: object) -> Iterator[ImageServer]:
    server = ImageServer(png, **options)  # type: ignore[arg-type]
    thread = threading.Thread(target=server.httpd.serve_forever, daemon=True)
    thread.start()
    try:
        yield server
    finally:
        server.httpd.shutdown()
        server.httpd.server_close()
