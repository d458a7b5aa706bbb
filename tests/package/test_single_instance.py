"""One instance per profile, over real local sockets: a later launch is a real second process."""

from __future__ import annotations

import os

os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")

import socket
import subprocess
import sys
import uuid
from pathlib import Path

import pytest

pytestmark = pytest.mark.gui

SECOND_LAUNCH = """
import sys
from PySide6.QtCore import QCoreApplication
from inglenook.app.services.single_instance import hand_over
app = QCoreApplication([])
print(hand_over(sys.argv[1], sys.argv[2:], timeout_ms=20000).name)
"""


def unique_name() -> str:
    return f"inglenook-test-{uuid.uuid4().hex[:12]}"


def test_a_second_launch_hands_its_model_paths_to_the_first(qtbot, qapp, tmp_path: Path) -> None:
    from inglenook.app.services.single_instance import InstanceServer

    server = InstanceServer(unique_name())
    assert server.listen()
    received: list[list[str]] = []
    server.opened.connect(received.append)
    model = tmp_path / "a model.gguf"
    second = subprocess.Popen([sys.executable, "-c", SECOND_LAUNCH, server.name, str(model)],
                              stdout=subprocess.PIPE, text=True, env={**os.environ, "QT_QPA_PLATFORM": "offscreen"})
    try:
        qtbot.waitUntil(lambda: bool(received), timeout=60_000)
        assert received == [[str(model)]]
        out, _ = second.communicate(timeout=60)
        assert out.strip() == "HANDED_OVER"
    finally:
        server.close()
        if second.poll() is None:
            second.kill()


def test_nobody_listening_means_this_launch_is_the_first(qapp) -> None:
    from inglenook.app.services.single_instance import Handoff, hand_over

    assert hand_over(unique_name(), [], timeout_ms=500) is Handoff.NONE_RUNNING


def test_a_hung_first_instance_is_reported_not_waited_on_forever(qapp) -> None:
    """Someone accepts the connection (the kernel does, for a frozen process) but never answers."""
    from PySide6.QtCore import QDir

    from inglenook.app.services.single_instance import Handoff, hand_over

    name = unique_name()
    path = Path(QDir.tempPath()) / name
    hung = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    hung.bind(str(path))
    hung.listen(4)
    try:
        assert hand_over(name, ["x.gguf"], timeout_ms=700) is Handoff.NOT_RESPONDING
    finally:
        hung.close()
        path.unlink(missing_ok=True)


def test_a_socket_left_by_a_crashed_instance_does_not_block_the_next_start(qapp) -> None:
    from PySide6.QtCore import QDir

    from inglenook.app.services.single_instance import Handoff, InstanceServer, hand_over

    name = unique_name()
    path = Path(QDir.tempPath()) / name
    stale = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    stale.bind(str(path))
    stale.close()  # the file stays, nobody listens: what a killed instance leaves
    assert path.exists()
    assert hand_over(name, [], timeout_ms=500) is Handoff.NONE_RUNNING
    server = InstanceServer(name)
    try:
        assert server.listen()
    finally:
        server.close()


def test_names_differ_per_profile(tmp_path: Path) -> None:
    from inglenook.app.services.single_instance import server_name

    first, second = server_name(tmp_path / "a"), server_name(tmp_path / "b")
    assert first != second
    assert len(first) < 60  # Unix socket paths are limited to ~100 bytes, temp folder included
