"""``inglenook transcribe FILE`` and ``inglenook say TEXT -o out.wav``: the speech room from the terminal.

Both use the engine's ``Speech`` alone (no database, no language model): a transcription
runs on the speech lane exactly as the API's does, and speech comes from the Piper helper.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from inglenook.cli.terminal import ProgressLine
from inglenook.engine import InvalidRequest, Paths

TEXT_FORMATS = ("txt", "srt", "vtt", "json")


def add_commands(commands: Any) -> None:
    transcribe = commands.add_parser(
        "transcribe", help="turn speech in an audio or video file into text",
        description="Transcribe wav, mp3, m4a, ogg, flac, webm, mp4 (anything FFmpeg reads) on this machine "
        "with Whisper (the starter model is tiny.en). Silence is skipped.",
    )
    transcribe.add_argument("file", help="the audio or video file")
    transcribe.add_argument("--format", choices=TEXT_FORMATS, default="txt", help="output format (default txt)")
    transcribe.add_argument("--model", help="speech-to-text model id (default: the installed one)")
    transcribe.add_argument("--language", help="the spoken language's code, e.g. en (multilingual models)")
    transcribe.add_argument("--prompt", help="words to expect: names, spelling, style")
    transcribe.add_argument("--translate", action="store_true", help="translate into English (multilingual models)")
    transcribe.add_argument("-o", "--output", help="write here instead of standard output")
    transcribe.set_defaults(handler=cmd_transcribe)

    say = commands.add_parser(
        "say", help="speak text into an audio file",
        description="Speak TEXT with an installed Piper voice (the starter voice is en_US-joe-medium). "
        "The file's extension picks its format: wav, flac, mp3, opus, aac or pcm.",
    )
    say.add_argument("text", help="the text to speak ('-' reads standard input)")
    say.add_argument("-o", "--output", required=True, help="the audio file to write")
    say.add_argument("--voice", help="an installed voice id (default: the starter voice)")
    say.add_argument("--speed", type=float, default=1.0, help="0.25 to 4 (default 1)")
    say.set_defaults(handler=cmd_say)


def cmd_transcribe(args: argparse.Namespace, paths: Paths) -> int:
    from inglenook.engine import Speech, TranscriptionOptions, render_transcript  # noqa: PLC0415 — keeps --help fast

    source = Path(args.file)
    if not source.is_file():
        raise InvalidRequest(f"{source} is not a file")
    progress = ProgressLine(sys.stderr)
    length = [0.0]

    def decoded(seconds: float) -> None:
        length[0] = seconds
        progress.show(f"transcribing {source.name}: 0:00 of {_clock(seconds)}")

    def heard(segment: Any) -> None:
        share = min(100, int(100 * segment.end / length[0])) if length[0] else 0
        progress.show(f"transcribing {source.name}: {_clock(segment.end)} of {_clock(length[0])} ({share}%)")

    speech = Speech(folder=paths.models / "speech")  # the starter models and those pulled
    try:
        options = TranscriptionOptions(language=args.language, prompt=args.prompt, translate=args.translate,
                                       words=args.format == "json")
        transcript = speech.transcribe(source, options, model=args.model, on_segment=heard,
                                       on_decoded=decoded).result()
    finally:
        progress.clear()
        speech.close()
    fmt = {"txt": "text", "json": "verbose_json"}.get(args.format, args.format)
    rendered = render_transcript(transcript, fmt, words=True)
    text = json.dumps(rendered, indent=2, ensure_ascii=False) + "\n" if isinstance(rendered, dict) else rendered
    if args.output:
        Path(args.output).write_text(text, encoding="utf-8")
    else:
        sys.stdout.write(text)
    return 0


def cmd_say(args: argparse.Namespace, paths: Paths) -> int:
    from inglenook.engine import SPEECH_FORMATS, Speech, atomic_write_bytes, encode_pcm  # noqa: PLC0415

    text = sys.stdin.read() if args.text == "-" else args.text
    output = Path(args.output)
    fmt = output.suffix.lower().lstrip(".") or "wav"
    fmt = {"ogg": "opus", "m4a": "aac", "raw": "pcm"}.get(fmt, fmt)
    if fmt not in SPEECH_FORMATS:
        raise InvalidRequest(f"cannot write .{fmt}: use one of {', '.join(SPEECH_FORMATS)}")
    speech = Speech(folder=paths.models / "speech")  # the starter models and those pulled
    try:
        rate, pcm = speech.speak(text, voice=args.voice, speed=args.speed)
        audio = b"".join(pcm)
    finally:
        speech.close()
    atomic_write_bytes(output, encode_pcm(audio, rate, fmt))
    print(f"wrote {output} ({len(audio) / 2 / rate:.1f} s of speech)", file=sys.stderr)
    return 0


def _clock(seconds: float) -> str:
    minutes, secs = divmod(int(seconds), 60)
    hours, minutes = divmod(minutes, 60)
    return f"{hours}:{minutes:02d}:{secs:02d}" if hours else f"{minutes}:{secs:02d}"
