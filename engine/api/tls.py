"""Optional TLS for the API server on a LAN: a certificate and key the user provides.

Checked before the server binds, so a wrong path or a key that does not match its
certificate is one clear sentence instead of a failure inside the server thread.
"""

from __future__ import annotations

import ssl
from dataclasses import dataclass
from pathlib import Path

from ..base import ServerError


@dataclass(frozen=True)
class TlsFiles:
    cert: Path
    key: Path

    @classmethod
    def from_paths(cls, cert: str | None, key: str | None) -> "TlsFiles | None":
        """Both paths, or neither (None: plain HTTP); one without the other is refused."""
        if not cert and not key:
            return None
        if not cert or not key:
            raise ServerError("TLS needs both a certificate (--tls-cert) and its private key (--tls-key)")
        return cls(Path(cert).expanduser(), Path(key).expanduser())

    def check(self) -> None:
        """Load the pair once, as the server will, and say plainly what is wrong."""
        for label, path in (("certificate", self.cert), ("private key", self.key)):
            if not path.is_file():
                raise ServerError(f"the TLS {label} file {path} does not exist")
        context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
        try:
            context.load_cert_chain(str(self.cert), str(self.key))
        except ssl.SSLError as exc:
            raise ServerError(
                f"the TLS certificate {self.cert} and key {self.key} cannot be used together: {exc.reason or exc}"
            ) from None
        except OSError as exc:
            raise ServerError(f"cannot read the TLS files: {exc.strerror or exc}") from None
