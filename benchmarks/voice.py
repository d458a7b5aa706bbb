"""Voice speed, ours beside the engines run directly, on the starter models; prints JSON.

- transcription real-time factor (seconds of work per second of audio) of about 30 s of
  speech: through ``Speech`` (decode + VAD + Whisper on the speech lane) and faster-whisper
  called directly on the same file with the same options and threads;
- from the end of a 5-second utterance (its file complete) to its final text;
- speech: time to first audio of one sentence and real-time factor, through ``Speech`` (the
  Piper helper process) and Piper run directly (its Python API in a process of its own: the
  benchmark, like the engine, never imports GPL code);
- voice mode (``--voice-mode``, on by default): from the end of the person's speech to the
  first audio of the answer, the window's pipeline driven through the engine's pieces (not the
  window: its audio devices add nothing the engine's calls do not, and a sound server's
  timing is not the app's): the utterance as the window sends it (16 kHz WAV) transcribed by
  ``Speech``, sent with ``ChatService.send`` to the starter LLM, the stream cut into sentences
  by the window's own ``Sentences``, the first sentence spoken by ``Speech``. Parts apart:
  recognition, first token, first sentence, first audio; plus the pause the window waits
  before it calls an utterance ended (``UtteranceGate``'s ``END_S``), which a person hears too.
  The window starts hearing the utterance at a shorter pause (``PAUSE_S``), so recognition
  overlaps the rest of that wait: the person hears the answer after
  max(END_S, PAUSE_S + recognition) + the answer's parts.

Medians of ``--rounds`` runs, the engines warmed first.

    python benchmarks/voice.py [--rounds 3]
"""

from __future__ import annotations

import argparse
import json
import os
import threading
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from inglenook.engine import Engine, Speech, TranscriptionOptions, encode_pcm
from inglenook.engine.speech.starter import find_starter_voice, find_starter_whisper

SENTENCES = (
    "The quick brown fox jumps over the lazy dog. Please close the window before you leave the house. "
    "The weather today is cold and windy with light rain. My favorite book is on the table in the kitchen. "
    "We will meet at the station early tomorrow morning. Reading a good story before bed helps me sleep. "
    "The children played in the park until the sun went down. Turn left at the next corner and walk straight ahead."
)
ONE_SENTENCE = "Inglenook reads this sentence aloud on your own machine."

# Piper run directly, in its own process: load the voice, then time one sentence as piper's
# own API makes it; prints {"first_audio_s", "total_s", "audio_s"} for each round.
PIPER_DIRECT = """
import json, sys, time
from piper import PiperVoice
voice = PiperVoice.load(sys.argv[1])
text, rounds = sys.argv[2], int(sys.argv[3])
list(voice.synthesize(text))  # warm
for _ in range(rounds):
    start = time.perf_counter(); first = None; samples = 0
    for chunk in voice.synthesize(text):
        first = first if first is not None else time.perf_counter() - start
        samples += len(chunk.audio_int16_bytes) // 2
    total = time.perf_counter() - start
    print(json.dumps({"first_audio_s": first, "total_s": total, "audio_s": samples / voice.config.sample_rate}))
"""


def median(values: list[float]) -> float:
    return round(statistics.median(values), 4)


# A question whose greedy answer from the starter SmolLM2 opens with a short sentence ("Dogs
# are a beloved and beloved family of pets."): what is timed is the pipeline, and a model
# that never ends a sentence (its answer to "What is the capital of France?" is a run of
# French words with no full stop) would time only the wait for the whole answer.
QUESTION = "Tell me about dogs."


def _as_window_sends_it(speech: Speech, text: str) -> bytes:
    """``text`` spoken by the starter voice, as the window hands a heard utterance to Whisper:
    a 16 kHz mono WAV (the microphone's rate), from its first to its last loud sample."""
    import numpy as np

    rate, pieces = speech.speak(text)
    pcm = np.frombuffer(b"".join(pieces), dtype="<i2").astype(np.float32)
    count = int(pcm.size * 16_000 / rate)
    at_16k = np.interp(np.arange(count) * (rate / 16_000), np.arange(pcm.size), pcm)
    return encode_pcm(at_16k.astype("<i2").tobytes(), 16_000, "wav")


def _one_turn(speech: Speech, engine: Engine, audio: bytes, model_id: str) -> dict[str, float | str]:
    """One spoken question to the first audio of its answer; seconds from the end of speech."""
    from inglenook.app.text.spoken import Sentences

    chats = engine.chats
    conversation = chats.new_conversation(model_id=model_id, sampling={"temperature": 0.0, "max_tokens": 64})
    start = time.perf_counter()  # the utterance is complete: the person stopped speaking
    text = speech.transcribe(audio).result().text
    heard = time.perf_counter()
    turn = chats.send(conversation.id, text or QUESTION)
    sent = time.perf_counter()
    marks: dict[str, float] = {}
    splitter, answer, speaking = Sentences(), "", None
    said: list[str] = []

    def speak(sentence: str) -> None:
        _rate, pcm = speech.speak(sentence)
        for _piece in pcm:
            marks.setdefault("first_audio", time.perf_counter())

    for chunk in turn:  # the answer keeps streaming while its first sentence is spoken, as in the window
        answer += chunk.text
        if chunk.text.strip():
            marks.setdefault("first_token", time.perf_counter())
        if speaking is None and (first := splitter.feed(answer)):
            marks["first_sentence"] = time.perf_counter()
            said.append(first[0])
            speaking = threading.Thread(target=speak, args=(first[0],))
            speaking.start()
    if speaking is None:  # an answer of one sentence without a full stop: spoken when it ends
        marks["first_sentence"] = time.perf_counter()
        said.append((splitter.finish(answer) or ["…"])[0])
        speaking = threading.Thread(target=speak, args=(said[0],))
        speaking.start()
    speaking.join()
    return {
        "recognition_s": heard - start,
        "first_token_s": marks["first_token"] - sent,
        "first_sentence_s": marks["first_sentence"] - marks["first_token"],
        "first_audio_s": marks["first_audio"] - marks["first_sentence"],
        "end_of_speech_to_first_audio_s": marks["first_audio"] - start,
        "heard": text, "first_sentence": said[0],
    }


def voice_mode_latency(speech: Speech, rounds: int) -> dict[str, object]:
    """Voice mode's wait, part by part, medians of ``rounds`` turns (a warm-up turn first)."""
    from inglenook.app.services.utterance import END_S, PAUSE_S  # the quiet the window waits for

    load_before = round(os.getloadavg()[0], 2)
    engine = Engine()
    try:
        model_id = engine.default_model_id()
        audio = _as_window_sends_it(speech, QUESTION)
        _one_turn(speech, engine, audio, model_id)  # warm: loads the model, Whisper and the voice
        turns = [_one_turn(speech, engine, audio, model_id) for _ in range(rounds)]
    finally:
        engine.close()
    parts = {key: median([float(t[key]) for t in turns]) for key in turns[0] if key.endswith("_s")}
    return {
        "driven": "engine pieces (Speech, ChatService, the window's Sentences), not the window",
        "model": model_id, "question": QUESTION, "heard": turns[-1]["heard"],
        "first_sentence": turns[-1]["first_sentence"],
        **parts,
        "utterance_end_pause_s": END_S,
        "early_hearing_pause_s": PAUSE_S,
        # Recognition starts at the shorter pause and runs while the longer one is waited out.
        "person_hears_after_s": round(max(END_S, PAUSE_S + parts["recognition_s"])
                                      + parts["end_of_speech_to_first_audio_s"] - parts["recognition_s"], 4),
        "goal_s": 1.5,
        "load_average_1m_before": load_before,  # a shared machine's other work slows every part
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--no-voice-mode", dest="voice_mode", action="store_false",
                        help="skip the voice-mode section (it loads the starter LLM)")
    parser.add_argument("--voice-mode-only", action="store_true", help="only the voice-mode section")
    args = parser.parse_args()
    os.environ.setdefault("INGLENOOK_HOME", tempfile.mkdtemp(prefix="inglenook-voice-bench-home-"))
    whisper, voice = find_starter_whisper(), find_starter_voice()
    if whisper is None or voice is None:
        sys.exit("needs the starter speech packages: make setup-dev")
    speech = Speech()
    if args.voice_mode_only:
        try:
            print(json.dumps({"voice_mode": voice_mode_latency(speech, args.rounds), "rounds": args.rounds}, indent=2))
        finally:
            speech.close()
        return
    work = Path(tempfile.mkdtemp(prefix="inglenook-voice-bench-"))
    try:
        rate, pcm = speech.speak(SENTENCES)
        long_pcm = b"".join(pcm)
        long_file = work / "speech.wav"
        long_file.write_bytes(encode_pcm(long_pcm, rate, "wav"))
        audio_s = len(long_pcm) / 2 / rate
        options = TranscriptionOptions()

        # -- transcription: ours and faster-whisper directly, interleaved --------------------
        from faster_whisper import WhisperModel

        direct = WhisperModel(str(whisper), device="cpu", compute_type="int8", cpu_threads=speech.threads,
                              local_files_only=True)
        speech.transcribe(long_file, options).result()  # warm: loads the model
        ours, theirs = [], []
        for _ in range(args.rounds):
            start = time.perf_counter()
            speech.transcribe(long_file, options).result()
            ours.append(time.perf_counter() - start)
            start = time.perf_counter()
            segments, _ = direct.transcribe(str(long_file), language="en", beam_size=1, best_of=1, vad_filter=True,
                                            condition_on_previous_text=False, temperature=0.0)
            "".join(s.text for s in segments)
            theirs.append(time.perf_counter() - start)

        # -- end of a 5-second utterance to its final text ---------------------------------
        rate, pcm = speech.speak("Please close the window before you leave the house.")
        short = b"".join(pcm)
        short = short + bytes(max(0, 5 * rate * 2 - len(short)))  # padded with silence to 5 s
        short_file = work / "five.wav"
        short_file.write_bytes(encode_pcm(short, rate, "wav"))
        finals = []
        for _ in range(args.rounds):
            start = time.perf_counter()
            speech.transcribe(short_file, options).result()
            finals.append(time.perf_counter() - start)

        # -- speech: ours (helper process) and Piper directly --------------------------------
        speech.speak("Warm up.")[1].close()
        first, totals, lengths = [], [], []
        for _ in range(args.rounds):
            start = time.perf_counter()
            rate, pcm = speech.speak(ONE_SENTENCE)
            got_first = None
            size = 0
            for chunk in pcm:
                got_first = got_first if got_first is not None else time.perf_counter() - start
                size += len(chunk)
            totals.append(time.perf_counter() - start)
            first.append(got_first or 0.0)
            lengths.append(size / 2 / rate)
        run = subprocess.run([sys.executable, "-c", PIPER_DIRECT, str(voice), ONE_SENTENCE, str(args.rounds)],
                             capture_output=True, text=True, check=True)
        piper = [json.loads(line) for line in run.stdout.splitlines() if line.startswith("{")]
        voice_mode = voice_mode_latency(speech, args.rounds) if args.voice_mode else None
    finally:
        speech.close()

    ours_rtf = median(ours) / audio_s
    theirs_rtf = median(theirs) / audio_s
    tts_rtf = median([t / a for t, a in zip(totals, lengths)])
    piper_rtf = median([p["total_s"] / p["audio_s"] for p in piper])
    print(json.dumps({
        "machine_threads_for_speech": speech.threads,
        "transcription": {
            "audio_s": round(audio_s, 2),
            "ours_rtf": round(ours_rtf, 4), "faster_whisper_direct_rtf": round(theirs_rtf, 4),
            "ours_speed_vs_direct": round(theirs_rtf / ours_rtf, 3),
            "ours_s": median(ours), "direct_s": median(theirs),
        },
        "utterance_5s_end_to_final_text_s": median(finals),
        "speech": {
            "sentence": ONE_SENTENCE,
            "ours_first_audio_s": median(first), "piper_direct_first_audio_s": median([p["first_audio_s"] for p in piper]),
            "ours_rtf": round(tts_rtf, 4), "piper_direct_rtf": round(piper_rtf, 4),
        },
        **({"voice_mode": voice_mode} if voice_mode else {}),
        "rounds": args.rounds,
    }, indent=2))


if __name__ == "__main__":
    main()
