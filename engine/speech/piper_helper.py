"""The Piper helper program: run as its own process (``python piper_helper.py --model VOICE.onnx``).

Why a separate process: ``piper-tts`` is GPL-3.0 (it carries espeak-ng) and Inglenook is
Apache-2.0. This file is the only code that imports it, it uses nothing of Inglenook (only
the standard library and piper), and the engine talks to it over pipes in the small protocol
below, as two programs aggregated side by side, never linked into one.

Protocol (stdout carries only protocol; piper's own logging goes to stderr):
  helper → engine, once:   {"ready": true, "sample_rate": 22050}\\n
  engine → helper:         {"text": "...", "length_scale": 1.0}\\n
  helper → engine, per sentence:  {"audio": N}\\n then N bytes of mono int16 little-endian PCM
  helper → engine, at the end:    {"done": true}\\n   (or {"error": "..."}\\n)
"""

from __future__ import annotations

import argparse
import json
import logging
import sys
from typing import Any, BinaryIO


def _send(out: BinaryIO, message: dict[str, Any], payload: bytes = b"") -> None:
    out.write(json.dumps(message).encode("utf-8") + b"\n" + payload)
    out.flush()


def main() -> int:
    parser = argparse.ArgumentParser(description="Piper text-to-speech over stdin/stdout")
    parser.add_argument("--model", required=True)
    parser.add_argument("--threads", type=int, default=1)
    args = parser.parse_args()
    logging.basicConfig(stream=sys.stderr, level=logging.WARNING)

    import onnxruntime  # noqa: PLC0415 — after argument parsing, so --help is instant
    from piper import PiperVoice, SynthesisConfig  # noqa: PLC0415

    out = sys.stdout.buffer
    voice = PiperVoice.load(args.model)
    # Bound onnxruntime's threads like CTranslate2's: the engine's step loop keeps its cores.
    options = onnxruntime.SessionOptions()
    options.intra_op_num_threads = max(1, args.threads)
    options.inter_op_num_threads = 1
    voice.session = onnxruntime.InferenceSession(args.model, sess_options=options,
                                                 providers=["CPUExecutionProvider"])
    _send(out, {"ready": True, "sample_rate": voice.config.sample_rate})
    for line in sys.stdin.buffer:
        try:
            request = json.loads(line)
            config = SynthesisConfig(length_scale=float(request.get("length_scale", 1.0)))
            for chunk in voice.synthesize(str(request["text"]), syn_config=config):
                pcm = chunk.audio_int16_bytes
                _send(out, {"audio": len(pcm)}, pcm)
            _send(out, {"done": True})
        except BrokenPipeError:
            return 0
        except Exception as exc:  # noqa: BLE001 — told to the engine, which raises it there
            _send(out, {"error": f"{type(exc).__name__}: {exc}"})
    return 0


if __name__ == "__main__":
    sys.exit(main())
