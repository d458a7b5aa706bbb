"""Run the real ``run_app`` and answer its "cannot start" dialogs as a person would.

    python startup_failure_driver.py OUT_DIR [--then-run 'shell command']

Started by tests/package/test_first_run_disk.py inside a mount namespace whose data disk is
read-only or full. Each "Inglenook cannot start" dialog is recorded (its words, a PNG of it
from QWidget.grab, the files in the data folder at that moment) into OUT_DIR/result.json.
The first dialog is answered with Quit, or, with ``--then-run``, by running that command (it
frees space) and clicking Try again; the window that then opens is recorded and the app quit.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

from PySide6.QtCore import QTimer
from PySide6.QtWidgets import QApplication, QMessageBox

from inglenook.app.main import run_app
from inglenook.engine import Paths

DIALOG_TITLE = "Inglenook cannot start"


def files_in(folder: Path) -> dict[str, int]:
    if not folder.is_dir():
        return {}
    return {p.name: p.stat().st_size for p in sorted(folder.iterdir()) if p.is_file()}


class Answerer:
    def __init__(self, app: QApplication, out: Path, then_run: str | None) -> None:
        self.app, self.out, self.then_run = app, out, then_run
        self.result: dict[str, Any] = {"dialogs": [], "window_shown": False}
        self.timer = QTimer(app)
        self.timer.timeout.connect(self.poll)
        self.timer.start(100)

    def poll(self) -> None:
        modal = QApplication.activeModalWidget()
        if isinstance(modal, QMessageBox) and modal.windowTitle() == DIALOG_TITLE and modal.isVisible():
            self.answer(modal)
            return
        main = [w for w in QApplication.topLevelWidgets() if w.windowTitle() == "Inglenook" and w.isVisible()
                and w.metaObject().className() == "MainWindow"]
        if main:
            self.result["window_shown"] = True
            self.app.quit()

    def answer(self, box: QMessageBox) -> None:
        number = len(self.result["dialogs"])
        image = self.out / f"dialog-{number}.png"
        box.grab().save(str(image))
        buttons = {button.text(): button for button in box.buttons()}
        self.result["dialogs"].append({
            "headline": box.text(), "body": box.informativeText(), "buttons": sorted(buttons),
            "image": str(image), "data_files": files_in(Paths.default().data),
        })
        if self.then_run and number == 0:
            subprocess.run(self.then_run, shell=True, check=True)  # noqa: S602 — the test's own command
            buttons["Try again"].click()
        else:
            buttons["Quit"].click()


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("out", type=Path)
    parser.add_argument("--then-run")
    args = parser.parse_args()
    app = QApplication(["inglenook"])
    answerer = Answerer(app, args.out, args.then_run)
    answerer.result["exit_code"] = run_app(["inglenook"])
    (args.out / "result.json").write_text(json.dumps(answerer.result, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
