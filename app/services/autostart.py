"""Start at login, the way each desktop expects it.

- Linux and other XDG desktops: ``$XDG_CONFIG_HOME/autostart/inglenook.desktop``;
- Windows: a value in ``HKCU\\Software\\Microsoft\\Windows\\CurrentVersion\\Run``;
- macOS: ``~/Library/LaunchAgents/app.inglenook.plist``.

Only the Linux form is exercised by the tests here; the other two follow each platform's
documented format and are written through Qt's registry access or as a plain file.
"""

from __future__ import annotations

import logging
import os
import shlex
import shutil
import sys
from pathlib import Path

from PySide6.QtCore import QSettings

log = logging.getLogger(__name__)

RUN_KEY = "HKEY_CURRENT_USER\\Software\\Microsoft\\Windows\\CurrentVersion\\Run"
LAUNCH_AGENT_LABEL = "app.inglenook"


def launch_command() -> list[str]:
    """How to start this Inglenook again: the bundle's program, or the installed script."""
    if getattr(sys, "frozen", False):
        return [sys.executable]
    found = shutil.which("inglenook-gui") or shutil.which("inglenook")
    return [found] if found else [sys.executable, "-m", "inglenook"]


def xdg_autostart_file(environ: dict[str, str] | None = None) -> Path:
    env = os.environ if environ is None else environ
    config = Path(env["XDG_CONFIG_HOME"]) if env.get("XDG_CONFIG_HOME") else Path.home() / ".config"
    return config / "autostart" / "inglenook.desktop"


def launch_agent_file() -> Path:
    return Path.home() / "Library" / "LaunchAgents" / f"{LAUNCH_AGENT_LABEL}.plist"


def xdg_entry(command: list[str]) -> str:
    return "\n".join([
        "[Desktop Entry]",
        "Type=Application",
        "Name=Inglenook",
        "Comment=Local AI chat and API, started at login",
        f"Exec={shlex.join(command)}",
        "Icon=inglenook",
        "Terminal=false",
        "X-GNOME-Autostart-enabled=true",
        "",
    ])


def launch_agent_plist(command: list[str]) -> str:
    arguments = "".join(f"\n        <string>{part}</string>" for part in command)
    return f"""<?xml version="1.0" encoding="UTF-8"?>
<!DOCTYPE plist PUBLIC "-//Apple//DTD PLIST 1.0//EN" "http://www.apple.com/DTDs/PropertyList-1.0.dtd">
<plist version="1.0">
<dict>
    <key>Label</key>
    <string>{LAUNCH_AGENT_LABEL}</string>
    <key>ProgramArguments</key>
    <array>{arguments}
    </array>
    <key>RunAtLoad</key>
    <true/>
</dict>
</plist>
"""


def set_start_at_login(enabled: bool, command: list[str] | None = None) -> None:
    """Create or remove this platform's autostart entry. OSError when it cannot be written."""
    command = command or launch_command()
    if sys.platform == "win32":
        registry = QSettings(RUN_KEY, QSettings.Format.NativeFormat)
        if enabled:
            registry.setValue("Inglenook", subprocess_line(command))
        else:
            registry.remove("Inglenook")
        registry.sync()
        return
    target = launch_agent_file() if sys.platform == "darwin" else xdg_autostart_file()
    if not enabled:
        target.unlink(missing_ok=True)
        return
    target.parent.mkdir(parents=True, exist_ok=True)
    text = launch_agent_plist(command) if sys.platform == "darwin" else xdg_entry(command)
    temporary = target.with_suffix(".tmp")
    temporary.write_text(text, encoding="utf-8")
    temporary.replace(target)
    log.info("start at login: wrote %s", target)


def subprocess_line(command: list[str]) -> str:
    """A Windows command line (the Run key holds one string)."""
    import subprocess  # noqa: PLC0415

    return subprocess.list2cmdline(command)


def is_enabled() -> bool:
    if sys.platform == "win32":
        return QSettings(RUN_KEY, QSettings.Format.NativeFormat).contains("Inglenook")
    return (launch_agent_file() if sys.platform == "darwin" else xdg_autostart_file()).is_file()
