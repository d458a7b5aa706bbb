"""Issue 13, points 6 and 7 through the real CLI in a subprocess: `inglenook alias`,
`inglenook launch … --print` and writing into a temporary HOME (an existing config merged,
with a backup), and `inglenook serve --context N` reaching the loaded model."""

from __future__ import annotations

import json
import os
import signal
import stat
import subprocess
import sys
import tomllib
from pathlib import Path

import httpx
import pytest

STARTER = "smollm2-135m-instruct:q4_1"


def inglenook(*args: str, home: Path, user_home: Path | None = None, path: str | None = None) -> subprocess.CompletedProcess:
    env = {**os.environ, "INGLENOOK_HOME": str(home)}
    for variable in ("CODEX_HOME", "CLAUDE_CONFIG_DIR", "XDG_CONFIG_HOME"):
        env.pop(variable, None)
    if user_home is not None:
        env["HOME"] = str(user_home)
    if path is not None:
        env["PATH"] = path
    return subprocess.run([sys.executable, "-m", "inglenook", *args], capture_output=True, text=True, env=env, timeout=300)


@pytest.fixture
def user_home(tmp_path: Path) -> Path:
    folder = tmp_path / "user"
    folder.mkdir()
    return folder


def test_alias_add_list_remove(home: Path, smollm2_path: Path) -> None:
    added = inglenook("alias", "Claude-Sonnet-4-5", "smollm2", home=home)
    assert added.returncode == 0, added.stderr
    assert f"claude-sonnet-4-5 are answered by {STARTER}" in added.stdout
    assert inglenook("alias", "fast", "claude-sonnet-4-5", home=home).returncode == 0  # an alias of an alias
    listed = inglenook("alias", "--list", home=home)
    rows = [line.split() for line in listed.stdout.splitlines()[1:]]
    assert rows == [["claude-sonnet-4-5", STARTER], ["fast", STARTER]]
    assert inglenook("alias", "--remove", "FAST", home=home).returncode == 0
    assert "fast" not in inglenook("alias", "--list", home=home).stdout
    for bad in (["alias", "--remove", "fast"], ["alias", "two words", "smollm2"], ["alias", "x", "no-such-model"]):
        failed = inglenook(*bad, home=home)
        assert failed.returncode == 1 and failed.stderr.startswith("inglenook: error: "), failed.stderr
        assert "Traceback" not in failed.stderr
    assert inglenook("alias", home=home).returncode == 2  # a usage error


def test_launch_print_writes_nothing(home: Path, smollm2_path: Path, user_home: Path) -> None:
    assert inglenook("alias", "gpt-5-codex", "smollm2", home=home).returncode == 0
    printed = inglenook("launch", "codex", "--model", "gpt-5-codex", "--print", home=home, user_home=user_home)
    assert printed.returncode == 0, printed.stderr
    config = tomllib.loads(printed.stdout.split("\n", 1)[1])  # after the "# Codex CLI: path" line
    assert config["model"] == "gpt-5-codex" and config["model_provider"] == "inglenook"
    provider = config["model_providers"]["inglenook"]
    assert provider["base_url"] == "http://127.0.0.1:8484/v1" and provider["wire_api"] == "responses"
    assert "env_key" not in provider  # no key is set
    claude = inglenook("launch", "claude", "--print", home=home, user_home=user_home)
    assert "export ANTHROPIC_BASE_URL=http://127.0.0.1:8484\n" in claude.stdout
    assert f"export ANTHROPIC_MODEL={STARTER}" in claude.stdout
    assert "CLAUDE_CODE_ATTRIBUTION_HEADER" not in claude.stdout
    assert list(user_home.iterdir()) == []


def test_launch_merges_existing_configs_with_a_backup(home: Path, smollm2_path: Path, user_home: Path) -> None:
    codex = user_home / ".codex" / "config.toml"
    codex.parent.mkdir()
    original = '# mine\nmodel = "gpt-5"\napproval_policy = "on-request"\n\n[model_providers.other]\nname = "Other"\nbase_url = "https://example.invalid/v1"\n\n[model_providers.inglenook]\nbase_url = "http://old:1/v1"\n'
    codex.write_text(original)
    opencode = user_home / ".config" / "opencode" / "opencode.json"
    opencode.parent.mkdir(parents=True)
    opencode.write_text(json.dumps({"theme": "dark", "provider": {"other": {"name": "Other"}}}))
    # The saved API settings (a key, another port) are what the clients are given.
    assert inglenook("alias", "fast", "smollm2", home=home).returncode == 0
    from inglenook.engine.store.settings import Settings
    from inglenook.engine.store.store import Store

    store = Store(home / "data" / "inglenook.db")
    Settings.load(store).save(store, api_port=9191, api_key="s3cret")
    store.close()

    wrote = inglenook("launch", "codex", "--model", "fast", home=home, user_home=user_home, path="/nonexistent")
    assert wrote.returncode == 0, wrote.stderr
    assert "not installed" in wrote.stdout and "npm install -g @openai/codex" in wrote.stdout
    merged = tomllib.loads(codex.read_text())
    assert merged["model"] == "fast" and merged["approval_policy"] == "on-request"
    assert merged["model_providers"]["other"]["base_url"] == "https://example.invalid/v1"
    ours = merged["model_providers"]["inglenook"]
    assert ours["base_url"] == "http://127.0.0.1:9191/v1" and ours["env_key"] == "INGLENOOK_API_KEY"
    assert "# mine" in codex.read_text()
    backups = list(codex.parent.glob("config.toml.inglenook-backup-*"))
    assert [b.read_text() for b in backups] == [original]

    assert inglenook("launch", "opencode", "--no-start", home=home, user_home=user_home).returncode == 0
    data = json.loads(opencode.read_text())
    assert data["theme"] == "dark" and data["provider"]["other"] == {"name": "Other"}
    assert data["provider"]["inglenook"]["options"] == {"baseURL": "http://127.0.0.1:9191/v1", "apiKey": "s3cret"}
    assert data["model"] == f"inglenook/{STARTER}" and STARTER in data["provider"]["inglenook"]["models"]
    assert len(list(opencode.parent.glob("opencode.json.inglenook-backup-*"))) == 1

    broken = user_home / ".claude" / "settings.json"
    broken.parent.mkdir()
    broken.write_text("{not json")
    refused = inglenook("launch", "claude", home=home, user_home=user_home)
    assert refused.returncode == 1 and "cannot be read" in refused.stderr
    assert broken.read_text() == "{not json"  # never rewritten


def test_launch_starts_an_installed_client_with_its_environment(home: Path, smollm2_path: Path, user_home: Path,
                                                                tmp_path: Path) -> None:
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    client = bin_dir / "claude"  # a stand-in for the real client: it reports what it was started with
    client.write_text('#!/bin/sh\necho "started with $ANTHROPIC_BASE_URL $ANTHROPIC_MODEL"\nexit 7\n')
    client.chmod(client.stat().st_mode | stat.S_IEXEC)
    ran = inglenook("launch", "claude", home=home, user_home=user_home, path=f"{bin_dir}:{os.environ['PATH']}")
    assert ran.returncode == 7, ran.stderr  # the client's own exit status
    assert f"started with http://127.0.0.1:8484 {STARTER}" in ran.stdout
    settings = json.loads((user_home / ".claude" / "settings.json").read_text())
    assert settings["env"]["ANTHROPIC_AUTH_TOKEN"] == "not-needed"


def test_serve_context_reaches_the_loaded_model(home: Path, smollm2_path: Path) -> None:
    env = {**os.environ, "INGLENOOK_HOME": str(home)}
    process = subprocess.Popen(
        [sys.executable, "-m", "inglenook", "serve", "--port", "0", "--context", "768"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env,
    )
    try:
        line = process.stdout.readline()
        assert line.startswith("Serving"), line + process.stderr.read()
        url = line.split(" at ", 1)[1].strip()
        reply = httpx.post(url + "/chat/completions", timeout=600, json={
            "model": STARTER, "messages": [{"role": "user", "content": "Hi"}], "max_tokens": 2})
        assert reply.status_code == 200, reply.text
        card = httpx.get(url + f"/models/{STARTER}", timeout=60).json()
        assert card["context_setting"] == 768 and card["context_in_use"] == 768
    finally:
        process.send_signal(signal.SIGINT)
        _, err = process.communicate(timeout=120)
    assert process.returncode == 0, err
    assert inglenook("serve", "--context", "5", home=home).returncode == 2
