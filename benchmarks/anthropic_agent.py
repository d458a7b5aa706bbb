"""The Messages API under an agent's conversation: how much of each turn's prompt is cached.

An agent-shaped conversation (a long system prompt, tool definitions, tool calls and their
results) is sent turn after turn through ``/v1/messages`` with the official ``anthropic``
package, the way Claude Code sends it: the whole history every time. For each turn the
usage's ``cache_read_input_tokens`` over the whole prompt is the cached share. A second run
changes one line at the top of the system prompt on every request (Claude Code's
per-request header) to show what that does to the share. Prints JSON.

    python benchmarks/anthropic_agent.py [--turns 4] [--context 4096] [--system-words 1200]
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import sys
import tempfile
import time
from typing import Any

TOOLS = [
    {"name": name, "description": f"{name.replace('_', ' ')} in the project",
     "input_schema": {"type": "object", "properties": {"path": {"type": "string"}, "text": {"type": "string"}},
                      "required": ["path"]}}
    for name in ("read_file", "write_file", "list_directory", "search_files", "run_command")
]
WORDS = ("the build reads each file once and keeps the cache warm so that the next turn starts "
         "from where the last one ended while the tools report what they changed").split()


def system_prompt(words: int) -> str:
    return " ".join(WORDS[i % len(WORDS)] for i in range(words))


def turn_messages(turn: int) -> list[dict[str, Any]]:
    """The history an agent sends at ``turn``: each earlier turn a tool call and its result."""
    messages: list[dict[str, Any]] = [{"role": "user", "content": "Look at the project and tidy the README."}]
    for t in range(turn):
        messages.append({"role": "assistant", "content": [
            {"type": "text", "text": f"Step {t}: reading a file."},
            {"type": "tool_use", "id": f"toolu_{t:04d}", "name": "read_file", "input": {"path": f"docs/part{t}.md"}},
        ]})
        result = " ".join(WORDS[(t + i) % len(WORDS)] for i in range(120))
        messages.append({"role": "user", "content": [{"type": "tool_result", "tool_use_id": f"toolu_{t:04d}", "content": result}]})
    return messages


def header_line(kind: str, turn: int) -> str:
    """The first system line: fixed, a timestamped request header, or Claude Code's billing header."""
    if kind == "timestamp":
        return f"x-request-header: cc_version=2.0.{turn}; request={time.time_ns()}"
    if kind == "claude-code":
        nonce = f"{(turn * 7919 + 12345) % 0xFFFFF:05x}"
        return f"x-anthropic-billing-header: cc_version=2.1.37.{turn * 37 % 0xFFF:03x}; cc_entrypoint=cli; cch={nonce};"
    return "x-request-header: fixed"


def run(client: Any, model: str, turns: int, system_words: int, header: str) -> list[dict[str, Any]]:
    rows = []
    base = system_prompt(system_words)
    for turn in range(turns):
        header_text = header_line(header, turn)
        system = [{"type": "text", "text": header_text},
                  {"type": "text", "text": base, "cache_control": {"type": "ephemeral"}}]
        started = time.perf_counter()
        reply = client.messages.create(model=model, max_tokens=16, temperature=0, system=system, tools=TOOLS,
                                       messages=turn_messages(turn))
        seconds = time.perf_counter() - started
        usage = reply.usage
        prompt = usage.input_tokens + (usage.cache_read_input_tokens or 0)
        rows.append({
            "turn": turn, "prompt_tokens": prompt, "cache_read_input_tokens": usage.cache_read_input_tokens,
            "cached_share": round((usage.cache_read_input_tokens or 0) / prompt, 3) if prompt else 0.0,
            "seconds": round(seconds, 2), "stop_reason": reply.stop_reason,
        })
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--turns", type=int, default=4)
    parser.add_argument("--context", type=int, default=4096)
    parser.add_argument("--system-words", type=int, default=1200)
    args = parser.parse_args()
    logging.basicConfig(level=logging.WARNING)
    os.environ.setdefault("INGLENOOK_HOME", tempfile.mkdtemp(prefix="inglenook-bench-"))
    os.environ.setdefault("HF_HUB_OFFLINE", "1")

    import anthropic  # after INGLENOOK_HOME is set
    from inglenook.engine.core.engine import Engine
    from inglenook.engine.api.server import ApiServer

    engine = Engine()
    engine.update_settings(context_size=args.context)
    server = ApiServer(engine, port=0)
    server.start()
    try:
        client = anthropic.Anthropic(base_url=server.url.removesuffix("/v1"), api_key="x", max_retries=0, timeout=600)
        model = engine.default_model_id()
        stable = run(client, model, args.turns, args.system_words, "fixed")
        volatile = run(client, model, args.turns, args.system_words, "timestamp")
        claude = run(client, model, args.turns, args.system_words, "claude-code")
    finally:
        server.stop()
        engine.close()
    later = lambda rows: [r["cached_share"] for r in rows[1:]]  # noqa: E731
    json.dump({
        "model": model, "context": args.context, "turns": args.turns,
        "stable_system": stable, "volatile_first_line": volatile, "claude_code_header": claude,
        "min_cached_share_after_turn_0": {"stable": min(later(stable), default=0.0),
                                          "volatile": min(later(volatile), default=0.0),
                                          "claude_code_header": min(later(claude), default=0.0)},
    }, sys.stdout, indent=2)
    print()


if __name__ == "__main__":
    main()
