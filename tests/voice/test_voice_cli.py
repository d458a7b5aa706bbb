"""``inglenook say`` and ``inglenook transcribe`` as a person runs them: real processes."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from .conftest import MAX_WER, SENTENCES, word_error_rate


def inglenook(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "inglenook", *args], capture_output=True, text=True, timeout=600)


def test_ten_sentences_round_trip_through_the_cli(tmp_path) -> None:
    heard = []
    for i, sentence in enumerate(SENTENCES):
        target = tmp_path / f"s{i}.mp3"
        said = inglenook("say", sentence, "-o", str(target))
        assert said.returncode == 0, said.stderr
        assert target.stat().st_size > 0
        done = inglenook("transcribe", str(target))
        assert done.returncode == 0, done.stderr
        heard.append(done.stdout.strip())
    wer = word_error_rate(list(SENTENCES), heard)
    print(f"CLI WER {wer:.3f}")
    assert wer <= MAX_WER, list(zip(SENTENCES, heard))


@pytest.mark.parametrize("fmt", ["txt", "srt", "vtt", "json"])
def test_transcribe_formats(spoken, fmt: str, tmp_path) -> None:
    out = tmp_path / f"out.{fmt}"
    done = inglenook("transcribe", str(spoken[6]), "--format", fmt, "-o", str(out))
    assert done.returncode == 0, done.stderr
    text = out.read_text(encoding="utf-8")
    if fmt == "json":
        body = json.loads(text)
        assert body["segments"] and body["words"]
        text = body["text"]
    elif fmt == "srt":
        assert text.startswith("1\n00:00:00,")
    elif fmt == "vtt":
        assert text.startswith("WEBVTT")
    spoken_text = " ".join(line for line in text.splitlines() if "-->" not in line and not line.isdigit()
                           and line != "WEBVTT")
    assert word_error_rate([SENTENCES[6]], [spoken_text]) <= MAX_WER, text


def test_cli_errors_are_one_line(tmp_path) -> None:
    missing = inglenook("transcribe", str(tmp_path / "nope.wav"))
    assert missing.returncode == 1 and missing.stderr.startswith("inglenook: error:")
    empty = tmp_path / "empty.wav"
    empty.write_bytes(b"")
    refused = inglenook("transcribe", str(empty))
    assert refused.returncode == 1 and "empty" in refused.stderr and "Traceback" not in refused.stderr
    bad = inglenook("say", "hello", "-o", str(tmp_path / "x.midi"))
    assert bad.returncode == 1 and "cannot write .midi" in bad.stderr
