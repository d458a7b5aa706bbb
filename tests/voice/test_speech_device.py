"""Where Whisper runs: CUDA first where CTranslate2 sees a GPU, the CPU otherwise, and a GPU
that cannot load or run the model falls back to the CPU instead of failing the request."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest

from inglenook.engine.speech.device import CPU, CUDA, DEVICE_SETTING, choose_speech_device, cuda_devices
from inglenook.engine.speech.starter import find_starter_whisper
from inglenook.engine.speech.transcriber import Transcriber, TranscriptionOptions

from .conftest import MAX_WER, SENTENCES, word_error_rate


def test_the_setting_overrides_the_hardware_and_a_bad_value_is_ignored(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(DEVICE_SETTING, "cpu")
    assert choose_speech_device() == CPU
    monkeypatch.setenv(DEVICE_SETTING, "CUDA")
    assert choose_speech_device() == CUDA
    monkeypatch.setenv(DEVICE_SETTING, "tpu")
    assert choose_speech_device() == (CUDA if cuda_devices() > 0 else CPU)
    monkeypatch.delenv(DEVICE_SETTING)
    assert choose_speech_device() == (CUDA if cuda_devices() > 0 else CPU)


def test_asked_for_cuda_without_a_gpu_whisper_runs_on_the_cpu(spoken: list[Path], caplog: pytest.LogCaptureFixture) -> None:
    if cuda_devices() > 0:
        pytest.skip("this machine has a CUDA device: the fallback is exercised only without one")
    from inglenook.engine.speech import decode_audio

    folder = find_starter_whisper()
    assert folder is not None
    transcriber = Transcriber(folder, threads=1, device=CUDA)
    with caplog.at_level(logging.WARNING, logger="inglenook.engine.speech.transcriber"):
        heard = transcriber.transcribe(decode_audio(spoken[0].read_bytes()), TranscriptionOptions())
    assert transcriber.device == CPU
    assert "using the CPU" in caplog.text
    assert word_error_rate([SENTENCES[0]], [heard.text]) <= MAX_WER
