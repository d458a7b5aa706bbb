"""`inglenook run MODEL PROMPT` answers without loading what only the app or the server needs.

The real command, with the starter model, in a fresh interpreter under the test's own
INGLENOOK_HOME; afterwards the interpreter lists what it imported. Behaviour, not timing:
`benchmarks/startup.py` measures the time.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.integration.test_cli import STARTER

pytestmark = pytest.mark.integration

# Packages of the desktop app, the HTTP server and the hub client: a terminal chat with a
# local model needs none of them, and each costs start-up time (Qt alone is most of a second).
NOT_ON_THE_RUN_PATH = ("PySide6", "shiboken6", "fastapi", "starlette", "uvicorn", "pydantic", "huggingface_hub",
                       "httpx")
# The engine's API rooms (request models, routes, the server itself) are the server's.
API_ROOMS = ("inglenook.engine.base.protocol", "inglenook.engine.api")


def test_run_imports_nothing_of_the_app_the_server_or_the_hub(home: Path, tmp_path: Path) -> None:
    report = tmp_path / "modules.json"
    # `python -m inglenook` as the console script runs it, then the interpreter's module list.
    code = (
        "import json, runpy, sys\n"
        f"sys.argv = ['inglenook', 'run', {STARTER!r}, 'Say hi.', '--max-tokens', '3', '--temperature', '0']\n"
        "try:\n"
        "    runpy.run_module('inglenook', run_name='__main__', alter_sys=True)\n"
        "except SystemExit as exc:\n"
        "    status = exc.code\n"
        f"open({str(report)!r}, 'w').write(json.dumps({{'status': status, 'modules': sorted(sys.modules)}}))\n"
    )
    env = {**os.environ, "INGLENOOK_HOME": str(home)}
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=300)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip(), "the model answered"
    found = json.loads(report.read_text())
    assert found["status"] == 0, result.stderr
    modules = found["modules"]
    assert "llama_cpp" in modules, "the probe ran the real command"
    assert sorted({m.split(".")[0] for m in modules} & set(NOT_ON_THE_RUN_PATH)) == []
    assert [m for m in modules if m.startswith(API_ROOMS) or m.startswith("inglenook.app")] == []
