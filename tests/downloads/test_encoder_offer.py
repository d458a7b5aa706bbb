"""The embedding model recommended for search (issue 30, item 4): ``Engine.encoder_offer``
names it with its size while no encoder is installed (the hub's listing when it answers, the
known size otherwise) and ``Engine.download_encoder`` fetches it through the ordinary download
path, after which search embeds with it. The local hub serves a tiny BERT GGUF
(tests/encoder_writer.py) under the recommended repo and file name."""

from __future__ import annotations

from pathlib import Path

from inglenook.engine import Engine
from inglenook.engine.models import encoder
from tests.encoder_writer import write_encoder
from tests.hubmock import HubMock, MockFile, MockRepo


def serve_encoder(hub: HubMock, folder: Path) -> MockFile:
    served = MockFile(encoder.FILE, write_encoder(folder / "served-encoder.gguf"))
    hub.add(MockRepo(encoder.REPO, [served], gguf={"architecture": "bert", "context_length": 512}))
    return served


def test_offered_with_the_hubs_size_then_downloaded_and_used_for_search(home: Path, tmp_path: Path,
                                                                        hub: HubMock) -> None:
    served = serve_encoder(hub, tmp_path)
    with Engine() as engine:
        offer = engine.encoder_offer()
        assert offer is not None and offer.listed
        assert (offer.repo, offer.file, offer.size_bytes) == (encoder.REPO, encoder.FILE, served.size)
        offline = engine.encoder_offer(online=False)
        assert offline is not None and not offline.listed and offline.size_bytes == encoder.KNOWN_SIZE
        before = engine.background.search_model()  # a chat model (or none): no encoder yet

        seen: list[str] = []
        record = engine.download_encoder(offer, progress=lambda p: seen.append(p.phase))
        assert "verifying" in seen and seen[-1] == "done"  # the sha256 check of any download
        assert record.architecture == "bert" and Path(record.path).name == encoder.FILE
        assert engine.encoder_offer() is None  # an encoder is installed: nothing to offer
        assert engine.background.search_model() == record.id != before  # chosen afresh: the encoder


def test_the_known_size_when_the_hub_has_no_listing(home: Path, hub: HubMock) -> None:
    with Engine() as engine:  # this hub does not serve the repo: its listing fails
        offer = engine.encoder_offer()
        assert offer is not None and not offer.listed and offer.size_bytes == encoder.KNOWN_SIZE


def test_none_when_an_encoder_is_installed(home: Path, tmp_path: Path) -> None:
    with Engine() as engine:
        assert engine.encoder_offer(online=False) is not None
        engine.import_path(write_encoder(tmp_path / "mine-F32.gguf"))
        assert engine.encoder_offer(online=False) is None
        assert engine.encoder_offer() is None  # no listing is asked for either
