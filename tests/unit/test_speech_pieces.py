"""The speech room's pure parts, with no model: caption clocks and shapes, the streaming WAV
header, the lane's thread bound, and the licence rule that only the helper imports piper."""

from __future__ import annotations

import ast
import struct
from pathlib import Path

from inglenook.engine.speech.captions import render_transcript, to_srt, to_vtt
from inglenook.engine.speech.encode import encode_pcm, wav_header
from inglenook.engine.speech.lane import speech_threads
from inglenook.engine.speech.transcriber import Segment, Transcript, Word

ROOT = Path(__file__).resolve().parents[2]

TRANSCRIPT = Transcript(
    text="Hello there. General news.", language="en", duration=3725.5,
    segments=(
        Segment(0, 0.0, 1.5, " Hello there.", words=(Word(0.0, 0.5, " Hello"), Word(0.5, 1.5, " there."))),
        Segment(1, 3723.25, 3725.5, " General news."),
    ),
)


def test_srt_and_vtt_clocks() -> None:
    srt = to_srt(TRANSCRIPT.segments)
    assert srt.splitlines()[:3] == ["1", "00:00:00,000 --> 00:00:01,500", "Hello there."]
    assert "2\n01:02:03,250 --> 01:02:05,500\nGeneral news.\n" in srt
    vtt = to_vtt(TRANSCRIPT.segments)
    assert vtt.startswith("WEBVTT\n\n00:00:00.000 --> 00:00:01.500\nHello there.\n")
    assert "01:02:03.250 --> 01:02:05.500" in vtt


def test_json_shapes() -> None:
    assert render_transcript(TRANSCRIPT, "json") == {"text": "Hello there. General news."}
    assert render_transcript(TRANSCRIPT, "txt") == "Hello there. General news.\n"
    verbose = render_transcript(TRANSCRIPT, "verbose_json", words=True, segments=False)
    assert isinstance(verbose, dict)
    assert verbose["language"] == "english" and "segments" not in verbose
    assert verbose["words"] == [{"word": "Hello", "start": 0.0, "end": 0.5}, {"word": "there.", "start": 0.5, "end": 1.5}]


def test_wav_headers() -> None:
    whole = encode_pcm(b"\x01\x00" * 100, 22_050, "wav")
    assert whole[:4] == b"RIFF" and struct.unpack("<I", whole[40:44])[0] == 200 and len(whole) == 244
    streaming = wav_header(22_050)
    assert struct.unpack("<I", streaming[40:44])[0] == 0xFFFFFFFF
    assert struct.unpack("<I", streaming[24:28])[0] == 22_050


def test_speech_threads_are_bounded(monkeypatch) -> None:
    monkeypatch.delenv("INGLENOOK_SPEECH_THREADS", raising=False)
    assert 1 <= speech_threads() <= 4
    monkeypatch.setenv("INGLENOOK_SPEECH_THREADS", "3")
    assert speech_threads() == 3


def test_only_the_helper_imports_piper() -> None:
    """piper-tts is GPL-3.0: no module of Inglenook but the helper program may import it."""
    offenders = []
    for path in sorted([*ROOT.joinpath("engine").rglob("*.py"), *ROOT.joinpath("cli").rglob("*.py"),
                        *ROOT.joinpath("app").rglob("*.py")]):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            names = ([a.name for a in node.names] if isinstance(node, ast.Import)
                     else [node.module or ""] if isinstance(node, ast.ImportFrom) and node.level == 0 else [])
            if any(n == "piper" or n.startswith("piper.") for n in names) and path.name != "piper_helper.py":
                offenders.append(str(path.relative_to(ROOT)))
    assert offenders == []
    helper = ROOT / "engine" / "speech" / "piper_helper.py"
    imported = {n.module for n in ast.walk(ast.parse(helper.read_text())) if isinstance(n, ast.ImportFrom)}
    assert not any(m and m.startswith(("inglenook", ".")) for m in imported)  # nothing of Inglenook
