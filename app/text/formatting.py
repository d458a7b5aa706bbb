"""Small formatting helpers shared by the widgets."""

from __future__ import annotations

import re
import time

from inglenook.engine import human_count, human_duration, human_size  # noqa: F401 — re-exported for the widgets


def relative_time(timestamp: float, now: float | None = None) -> str:
    now = now or time.time()
    delta = max(0.0, now - timestamp)
    if delta < 60:
        return "now"
    if delta < 3600:
        return f"{int(delta // 60)}m"
    if delta < 86400:
        return f"{int(delta // 3600)}h"
    if delta < 7 * 86400:
        return f"{int(delta // 86400)}d"
    return time.strftime("%b %d", time.localtime(timestamp))


def model_label(record) -> str:  # noqa: ANN001 — a ModelRecord
    """A readable name from the file name: 'SmolLM2 135M Instruct' for SmolLM2-135M-Instruct.Q4_1.gguf."""
    name = str(record.name or record.id.split(":")[0])
    quant = str(record.quantization or "")
    if quant and name.lower().endswith(quant.lower()):
        name = name[: -len(quant)]
    return re.sub(r"[-_.\s]+", " ", name).strip() or record.id


# A model whose file carries no chat template (engine.base_models): the words the picker, the
# Models page and a new chat use for it.
BASE_MODEL = "base model (no chat template)"
BASE_MODEL_TIP = ("This model was trained to continue text, not to chat: its file has no chat template. "
                  "Chats with it use a generic template (ChatML) it never saw, so answers may ramble "
                  "or show markers like <|im_end|>.")
BASE_MODEL_NOTE = ("{name} is a base model (no chat template): it continues text rather than answering. "
                   "Your messages will be wrapped in a generic chat template (ChatML) it was not trained on, "
                   "so expect rambling answers or stray markers. For a conversation, pick an instruct or "
                   "chat model in the header.")
