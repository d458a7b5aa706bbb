"""client_configs: each client's section merged into a real file in a temporary HOME."""

from __future__ import annotations

import json
import tomllib
from pathlib import Path

import pytest

from inglenook.engine.api.client_configs import ClientConfigError, Endpoint, client_setup, write_client_config


@pytest.fixture(autouse=True)
def _no_client_dirs(monkeypatch: pytest.MonkeyPatch) -> None:
    for variable in ("CODEX_HOME", "CLAUDE_CONFIG_DIR", "XDG_CONFIG_HOME"):
        monkeypatch.delenv(variable, raising=False)


def test_endpoint_of_an_any_address_server_is_loopback() -> None:
    assert Endpoint.of("0.0.0.0", 8484, "m", None).v1 == "http://127.0.0.1:8484/v1"
    assert Endpoint.of("::", 1, "m", "").root == "http://[::1]:1" and Endpoint.of("::", 1, "m", "").api_key is None


def test_codex_twice_is_one_change_and_one_backup(tmp_path: Path) -> None:
    setup = client_setup("codex", Endpoint.of("127.0.0.1", 8484, "fast", "k"), home=tmp_path)
    setup.path.parent.mkdir()
    setup.path.write_text('model = "o3"\n[tui]\nnotifications = true\n')
    assert write_client_config(setup) is not None
    first = setup.path.read_text()
    assert write_client_config(setup) is None  # nothing to change: no second backup
    assert setup.path.read_text() == first
    assert len(list(setup.path.parent.glob("*.inglenook-backup-*"))) == 1
    parsed = tomllib.loads(first)
    assert parsed["tui"] == {"notifications": True} and parsed["model"] == "fast"
    assert parsed["model_providers"]["inglenook"]["env_key"] == "INGLENOOK_API_KEY"


def test_codex_refuses_what_it_cannot_merge(tmp_path: Path) -> None:
    setup = client_setup("codex", Endpoint.of("127.0.0.1", 8484, "fast", None), home=tmp_path)
    setup.path.parent.mkdir()
    for text in ("model = \n", 'model_providers.inglenook.base_url = "http://x/v1"\n'):
        setup.path.write_text(text)
        with pytest.raises(ClientConfigError):
            write_client_config(setup)
        assert setup.path.read_text() == text


def test_claude_keeps_other_settings_and_drops_a_competing_key(tmp_path: Path) -> None:
    setup = client_setup("claude", Endpoint.of("127.0.0.1", 8484, "m", None), home=tmp_path)
    setup.path.parent.mkdir()
    setup.path.write_text(json.dumps({"permissions": {"allow": ["Bash"]}, "env": {"FOO": "1", "ANTHROPIC_API_KEY": "sk-real"}}))
    write_client_config(setup)
    data = json.loads(setup.path.read_text())
    assert data["permissions"] == {"allow": ["Bash"]} and data["env"]["FOO"] == "1"
    assert "ANTHROPIC_API_KEY" not in data["env"] and data["env"]["ANTHROPIC_BASE_URL"] == "http://127.0.0.1:8484"
    assert "CLAUDE_CODE_ATTRIBUTION_HEADER" not in data["env"]
    # A long first prefill on a CPU outlasts Claude Code's 5-minute stream watchdog otherwise.
    assert int(data["env"]["CLAUDE_STREAM_IDLE_TIMEOUT_MS"]) >= 3_600_000
    assert int(data["env"]["API_TIMEOUT_MS"]) >= 3_600_000


def test_opencode_keeps_models_added_before(tmp_path: Path) -> None:
    first = client_setup("opencode", Endpoint.of("127.0.0.1", 8484, "a:q4", None), home=tmp_path)
    write_client_config(first)
    write_client_config(client_setup("opencode", Endpoint.of("127.0.0.1", 8484, "b:q8", None), home=tmp_path))
    data = json.loads(first.path.read_text())
    assert set(data["provider"]["inglenook"]["models"]) == {"a:q4", "b:q8"} and data["model"] == "inglenook/b:q8"
    first.path.write_text("[1, 2]")
    with pytest.raises(ClientConfigError):
        write_client_config(first)
