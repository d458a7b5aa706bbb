"""Run Codex CLI against Inglenook exactly as the README sets it up, and print what happened.

Not a test (it needs the ``codex`` binary, e.g. ``npm install -g @openai/codex``, and a
first turn reads several thousand tokens of Codex's instructions and tools): a check for a
person or the lead. It serves the default model from a throwaway INGLENOOK_HOME on a free
port, writes a CODEX_HOME/config.toml with the README's provider block, runs
``codex exec`` and then ``codex exec resume --last`` (the second turn of the same
conversation, which should come mostly from the prompt cache), and prints
JSON: exit codes, seconds, the answers' last lines and the server's usage per request.

    .venv/bin/python scripts/codex_check.py [--codex PATH] [--context 8192] [--prompt TEXT]
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

CONFIG = """model = "{model}"
model_provider = "inglenook"

[model_providers.inglenook]
name = "Inglenook"
base_url = "{url}"
wire_api = "responses"
"""


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--codex", default=shutil.which("codex"), help="the codex binary (default: on PATH)")
    parser.add_argument("--context", type=int, default=8192, help="context size for the model (Codex's prompt is long)")
    parser.add_argument("--prompt", default="Say hello.")
    parser.add_argument("--timeout", type=float, default=900.0, help="seconds one codex run may take")
    args = parser.parse_args()
    if not args.codex:
        print("codex is not installed; npm install -g @openai/codex", file=sys.stderr)
        return 2
    scratch = Path(tempfile.mkdtemp(prefix="inglenook-codex-"))
    os.environ["INGLENOOK_HOME"] = str(scratch / "home")

    from inglenook.engine import ApiServer, Engine  # after INGLENOOK_HOME is set

    usages = UsageLog()
    logging.getLogger("inglenook.engine.api.responses.routes").addHandler(usages)
    logging.getLogger("inglenook.engine.api.responses.routes").setLevel(logging.INFO)
    with Engine() as engine:
        engine.update_settings(context_size=args.context)
        server = ApiServer(engine, port=0)
        server.start()
        try:
            codex_home = scratch / "codex"
            codex_home.mkdir()
            model = engine.default_model_id()
            (codex_home / "config.toml").write_text(CONFIG.format(model=model, url=server.url))
            workdir = scratch / "project"
            workdir.mkdir()
            first = run_codex(args, codex_home, workdir, ["exec", "--skip-git-repo-check", args.prompt])
            # The same conversation's next turn: its history is the first turn's prompt and answer.
            second = run_codex(args, codex_home, workdir, ["exec", "--skip-git-repo-check", "resume", "--last", "Thanks."])
            runs = [first, second]
        finally:
            server.stop()
    print(json.dumps({"model": model, "codex": args.codex, "runs": runs, "requests": usages.requests}, indent=2))
    return 0 if all(r["exit_code"] == 0 for r in runs) else 1


def run_codex(args: argparse.Namespace, codex_home: Path, workdir: Path, command: list[str]) -> dict[str, Any]:
    started = time.monotonic()
    done = subprocess.run(
        [args.codex, *command], cwd=workdir, capture_output=True, text=True,
        env={**os.environ, "CODEX_HOME": str(codex_home)}, timeout=args.timeout, stdin=subprocess.DEVNULL,
    )
    lines = [line for line in (done.stdout + done.stderr).splitlines() if line.strip()]
    return {"exit_code": done.returncode, "seconds": round(time.monotonic() - started, 1), "last_lines": lines[-6:]}


class UsageLog(logging.Handler):
    """Collects the usage line the server logs for each Responses request (Codex stores none)."""

    LINE = re.compile(r"(\d+) input tokens \((\d+) cached\), (\d+) output")

    def __init__(self) -> None:
        super().__init__(logging.INFO)
        self.requests: list[dict[str, Any]] = []

    def emit(self, record: logging.LogRecord) -> None:
        found = self.LINE.search(record.getMessage())
        if found:
            prompt, cached, output = (int(g) for g in found.groups())
            self.requests.append({
                "input_tokens": prompt, "cached_tokens": cached, "output_tokens": output,
                "cached_share": round(cached / prompt, 3) if prompt else 0.0,
            })


if __name__ == "__main__":
    sys.exit(main())
