"""Where Whisper runs: on an NVIDIA GPU through CTranslate2's CUDA build when one is visible and
its libraries load, else on the CPU with int8 weights.

PyPI's CTranslate2 wheels for Linux and Windows carry CUDA support; they need the CUDA 12
runtime, cuBLAS and cuDNN 9 at run time, which a machine with the NVIDIA driver may or may not
have. So CUDA is only a first choice: a model that fails to load or to run on it is loaded
again on the CPU (``Transcriber``), and the log says why.
"""

from __future__ import annotations

import logging
import os
from dataclasses import dataclass

log = logging.getLogger(__name__)

DEVICE_SETTING = "INGLENOOK_SPEECH_DEVICE"  # "cpu" or "cuda": overrides the choice below


@dataclass(frozen=True)
class SpeechDevice:
    device: str  # CTranslate2's name: "cpu" or "cuda"
    compute_type: str  # int8 weights on the CPU; int8 weights with float16 activations on a GPU

    @property
    def on_gpu(self) -> bool:
        return self.device == "cuda"


CPU = SpeechDevice("cpu", "int8")
CUDA = SpeechDevice("cuda", "int8_float16")


def cuda_devices() -> int:
    """How many CUDA devices CTranslate2 sees (0 without a driver, or with a CPU-only build)."""
    try:
        import ctranslate2  # noqa: PLC0415 — loaded with faster-whisper, on first use

        return int(ctranslate2.get_cuda_device_count())
    except Exception as exc:  # noqa: BLE001 — any failure to ask means no GPU for speech
        log.debug("CTranslate2 cannot count CUDA devices: %s", exc)
        return 0


def choose_speech_device() -> SpeechDevice:
    configured = os.environ.get(DEVICE_SETTING, "").strip().lower()
    if configured == "cpu":
        return CPU
    if configured == "cuda":
        return CUDA
    if configured:
        log.warning("%s=%r is neither cpu nor cuda: choosing by the hardware", DEVICE_SETTING, configured)
    return CUDA if cuda_devices() > 0 else CPU
