"""Tool rounds and the prefix cache: a three-round tool conversation with mcp-server-time.

One user message, answered in three rounds: the model calls ``get_current_time`` (forced with
``tool_choice``, as tiny models do not choose tools reliably), reads the result, calls again,
reads it, and answers in words. Every call is approved (the approver here says yes at once).
Reported per round: prompt tokens, cached tokens, their share and time to first token; then
round 2's time to first token in the same conversation run again with the cache off. Prints JSON.

    python benchmarks/tools.py [--max-tokens 48] [--model MODEL_ID]
"""

from __future__ import annotations

import argparse
import json
import logging
import shutil
import sys
import tempfile
from pathlib import Path
from typing import Any

from inglenook.engine import Engine, Paths
from inglenook.engine.tools import McpServerConfig, approve_all

QUESTION = "What time is it in Tokyo, and in Lisbon?"


def run(engine: Engine, config: McpServerConfig, use_cache: bool, max_tokens: int, model: str | None) -> list[dict]:
    chats = engine.chats
    if chats.tools.servers.find(config.name) is None:
        chats.tools.servers.add(config)
    conversation = chats.new_conversation(model_id=model, system_prompt="You are a helpful assistant.")
    chats.set_chat_tools(conversation.id, [config.name])
    turn = chats.send_with_tools(conversation.id, QUESTION, approve_all, tool_choice="get_current_time",
                                 max_rounds=3, use_cache=use_cache, temperature=0.0, seed=7, max_tokens=max_tokens)
    turn.then_choice = "get_current_time"
    turn.run()
    return [{"round": r.round, "prompt_tokens": r.prompt_tokens, "cached_tokens": r.cached_tokens,
             "cached_share": round(r.cached_share, 3), "ttft_ms": round(r.ttft_s * 1000, 1), "calls": r.calls}
            for r in turn.rounds] + [{"tool_seconds": round(turn.tool_seconds, 3)}]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--max-tokens", type=int, default=48)
    parser.add_argument("--model", default=None, help="a model id (default: the default model)")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.WARNING)
    server = shutil.which("mcp-server-time", path=str(Path(sys.executable).parent)) or shutil.which("mcp-server-time")
    if server is None:
        print(json.dumps({"error": "mcp-server-time is not installed (pip install mcp-server-time)"}))
        return 1
    config = McpServerConfig("time", command=server, args=("--local-timezone", "UTC"))
    with tempfile.TemporaryDirectory() as home:
        with Engine(Paths.under(Path(home))) as engine:
            cached = run(engine, config, True, args.max_tokens, args.model)
            uncached = run(engine, config, False, args.max_tokens, args.model)
    rounds = [r for r in cached if "round" in r]
    report: dict[str, Any] = {
        "question": QUESTION,
        "rounds": rounds,
        "tool_seconds": cached[-1]["tool_seconds"],
        "cached_share_round_2": rounds[1]["cached_share"] if len(rounds) > 1 else None,
        "cached_share_round_3": rounds[2]["cached_share"] if len(rounds) > 2 else None,
        "round_2_ttft_ms": rounds[1]["ttft_ms"] if len(rounds) > 1 else None,
        "round_2_ttft_ms_cache_off": next((r["ttft_ms"] for r in uncached if r.get("round") == 2), None),
    }
    print(json.dumps(report, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
