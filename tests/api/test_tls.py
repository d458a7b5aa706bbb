"""TLS on the API server with a self-signed certificate made here, read by the OpenAI SDK."""

from __future__ import annotations

import ssl
import subprocess
from pathlib import Path

import httpx
import openai
import pytest

from inglenook.engine.api.server import ApiServer
from inglenook.engine.api.tls import TlsFiles
from inglenook.engine.base.errors import ServerError
from inglenook.engine.core.engine import Engine

from .conftest import STARTER, serving

pytestmark = pytest.mark.api


def self_signed(folder: Path, name: str = "server") -> TlsFiles:
    cert, key = folder / f"{name}.crt", folder / f"{name}.key"
    subprocess.run(
        ["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1", "-subj", "/CN=localhost",
         "-addext", "subjectAltName=IP:127.0.0.1,DNS:localhost", "-keyout", str(key), "-out", str(cert)],
        check=True, capture_output=True,
    )
    return TlsFiles(cert, key)


def test_the_server_speaks_tls_with_the_given_certificate(engine: Engine, tmp_path: Path) -> None:
    tls = self_signed(tmp_path)
    with serving(engine, tls=tls) as server:
        assert server.url.startswith("https://127.0.0.1:")
        verified = httpx.Client(verify=ssl.create_default_context(cafile=str(tls.cert)), timeout=300)
        client = openai.OpenAI(base_url=server.url, api_key="x", http_client=verified, max_retries=0)
        answer = client.chat.completions.create(
            model=STARTER, messages=[{"role": "user", "content": "Hi"}], max_tokens=3, temperature=0
        )
        assert answer.choices[0].message.content is not None
        with pytest.raises(httpx.ConnectError):  # an unknown certificate is refused by default
            httpx.get(server.url + "/models")
        with pytest.raises(httpx.HTTPError):  # plain HTTP on the TLS port gets no answer
            httpx.get(server.url.replace("https", "http") + "/models").raise_for_status()


def test_bad_tls_files_are_one_clear_error(engine: Engine, tmp_path: Path) -> None:
    with pytest.raises(ServerError, match="both a certificate"):
        TlsFiles.from_paths(str(tmp_path / "a.crt"), None)
    with pytest.raises(ServerError, match="does not exist"):
        ApiServer(engine, port=0, tls=TlsFiles(tmp_path / "missing.crt", tmp_path / "missing.key")).start()
    one, other = self_signed(tmp_path, "one"), self_signed(tmp_path, "other")
    with pytest.raises(ServerError, match="cannot be used together"):
        ApiServer(engine, port=0, tls=TlsFiles(one.cert, other.key)).start()
