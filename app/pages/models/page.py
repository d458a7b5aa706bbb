"""The Models page: find and download models from Hugging Face, see downloads in progress,
and manage installed models (size, delete, show in folder, import from disk).

Layout: a header with the import buttons, the DOWNLOADS section (only while there is
something to show), then three tabs: Discover (``HubBrowser``), Installed (model rows) and
Speech (``SpeechModels``: Whisper models and Piper voices, installed and on the hub).
Everything slow runs on the window's ``Workers`` (imports on the models lane, downloads on
theirs); errors go to the page's banner, explained by ``errors.explain``.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable
from pathlib import Path

from PySide6.QtCore import Qt, QTimer, Signal
from PySide6.QtWidgets import (
    QButtonGroup,
    QFileDialog,
    QHBoxLayout,
    QLabel,
    QMenu,
    QMessageBox,
    QPushButton,
    QStackedWidget,
    QVBoxLayout,
    QWidget,
)

from inglenook.engine import (
    Engine,
    FoundModel,
    ImportResult,
    LoadPlan,
    ModelRecord,
    QuantOption,
    find_known_places,
)

from inglenook.app.services import errors as actions
from inglenook.app.widgets.banner import Banner
from inglenook.app.text.formatting import model_label
from inglenook.app.pages.models.downloads import DownloadsPanel
from inglenook.app.pages.models.hub import HubBrowser
from inglenook.app.pages.models.installed import InstalledList, ModelRow
from inglenook.app.pages.models.speech import SpeechModels
from inglenook.app.services.errors import Explanation
from inglenook.app.services.operations import Operations

log = logging.getLogger(__name__)

NOTICE_MS = 8000


class ModelsPage(QWidget):
    remove_requested = Signal(str)  # a confirmed removal
    models_changed = Signal()  # a download or an import registered models: refresh the picker
    action_requested = Signal(str)  # a banner action the window performs (errors.OPEN_SETTINGS…)

    DISCOVER, INSTALLED, SPEECH = 0, 1, 2

    def __init__(self, engine: Engine, operations: Operations, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setObjectName("ModelsPage")
        self.engine = engine
        self.operations = operations
        self.records: list[ModelRecord] = []
        self.confirm = True  # tests turn the confirmation dialogs off
        self.last_import: ImportResult | None = None
        self._retry: Callable[[], None] | None = None

        layout = QVBoxLayout(self)
        layout.setContentsMargins(36, 26, 36, 20)
        layout.setSpacing(12)
        layout.addLayout(self._build_header())
        self.notice = QLabel("", self)
        self.notice.setObjectName("Notice")
        self.notice.setWordWrap(True)
        self.notice.hide()
        self._notice_timer = QTimer(self)
        self._notice_timer.setSingleShot(True)
        self._notice_timer.timeout.connect(self.notice.hide)
        layout.addWidget(self.notice)
        self.banner = Banner(self)
        self.banner.setMaximumWidth(16777215)
        self.banner.action.connect(self._banner_action)
        layout.addWidget(self.banner)

        self.downloads = DownloadsPanel(engine, operations, self)
        self.downloads.installed.connect(self._downloaded)
        self.downloads.failed.connect(lambda exc: self.show_error(exc, self.downloads.retry))
        self.downloads.changed.connect(self._update_states)
        layout.addWidget(self.downloads)
        self.downloads_area = self.downloads.cards_layout  # kept for callers of the earlier layout

        layout.addLayout(self._build_tabs())
        self.stack = QStackedWidget(self)
        self.browser = HubBrowser(engine, operations, self.stack)
        self.browser.download_requested.connect(self.download)
        self.browser.failed.connect(lambda exc: self.show_error(exc, self.browser.retry))
        self.installed = InstalledList(self.stack)
        self.installed.delete_requested.connect(self._confirm_delete)
        self.speech = SpeechModels(engine, operations, self.stack)
        self.speech.failed.connect(self.show_error)
        self.stack.addWidget(self.browser)
        self.stack.addWidget(self.installed)
        self.stack.addWidget(self.speech)
        layout.addWidget(self.stack, 1)
        self.show_tab(self.INSTALLED)
        self.downloads.refresh_pending()

    def _build_header(self) -> QVBoxLayout:
        """The title and hint, then the buttons on a row of their own (so a narrow window keeps them)."""
        header = QVBoxLayout()
        header.setSpacing(8)
        text = QVBoxLayout()
        text.setSpacing(2)
        title = QLabel("Models", self)
        title.setObjectName("PageTitle")
        hint = QLabel("Download GGUF models from Hugging Face, or use the ones already on this computer. "
                      "Drop a .gguf file on the window to add it.", self)
        hint.setObjectName("PageHint")
        hint.setWordWrap(True)
        text.addWidget(title)
        text.addWidget(hint)
        header.addLayout(text)
        buttons = QHBoxLayout()
        buttons.setSpacing(8)
        self.import_button = QPushButton("Import file or folder…", self)
        self.import_button.setCursor(Qt.CursorShape.PointingHandCursor)
        menu = QMenu(self.import_button)
        menu.addAction("A GGUF file…", self.choose_file)
        menu.addAction("A folder of GGUF files…", self.choose_folder)
        self.import_button.setMenu(menu)
        self.find_button = QPushButton("Find models from other apps", self)
        self.find_button.setCursor(Qt.CursorShape.PointingHandCursor)
        self.find_button.setToolTip("Look in the Hugging Face cache, LM Studio and Ollama; "
                                    "models are used where they are, nothing is copied")
        self.find_button.clicked.connect(self.find_other_apps)
        buttons.addWidget(self.import_button)
        buttons.addWidget(self.find_button)
        buttons.addStretch(1)
        header.addLayout(buttons)
        return header

    def _build_tabs(self) -> QHBoxLayout:
        row = QHBoxLayout()
        row.setSpacing(4)
        self.tabs = QButtonGroup(self)
        self.tabs.setExclusive(True)
        self.discover_tab = QPushButton("Discover", self)
        self.installed_tab = QPushButton("Installed", self)
        self.speech_tab = QPushButton("Speech", self)
        self.speech_tab.setToolTip("Speech-to-text models (Whisper) and voices (Piper): installed, and more to download")
        for index, button in ((self.DISCOVER, self.discover_tab), (self.INSTALLED, self.installed_tab),
                              (self.SPEECH, self.speech_tab)):
            button.setObjectName("TabButton")
            button.setCheckable(True)
            button.setCursor(Qt.CursorShape.PointingHandCursor)
            self.tabs.addButton(button, index)
            row.addWidget(button)
        self.tabs.idClicked.connect(self.show_tab)
        row.addStretch(1)
        return row

    # -- tabs ---------------------------------------------------------------------------------

    def show_tab(self, index: int) -> None:
        self.tabs.button(index).setChecked(True)
        self.stack.setCurrentIndex(index)
        if index == self.DISCOVER and not self.browser.searched:
            self.browser.run_search()  # the most downloaded GGUF models, until the user searches
            self.browser.search.setFocus()
        if index == self.SPEECH and not self.speech.loaded:
            self.speech.load()  # what is installed, and Whisper models and voices on the hub

    # -- installed ----------------------------------------------------------------------------

    def set_models(self, records: list[ModelRecord], loaded: str | None,
                   plans: dict[str, LoadPlan] | None = None, base_models: set[str] | None = None) -> None:
        self.records = list(records)
        self.installed.set_models(records, loaded, plans or {}, base_models or set())
        self.installed_tab.setText(f"Installed  {len(records)}")
        self._update_states()

    @property
    def rows(self) -> list[ModelRow]:
        return self.installed.rows

    def _confirm_delete(self, model_id: str) -> None:
        if self.confirm:
            answer = QMessageBox.question(
                self, "Delete model",
                f"Delete {model_id}? Files in Inglenook's models folder are deleted from disk; "
                "imported files stay where they are.",
                QMessageBox.StandardButton.Yes | QMessageBox.StandardButton.Cancel,
                QMessageBox.StandardButton.Cancel,
            )
            if answer != QMessageBox.StandardButton.Yes:
                return
        self.remove_requested.emit(model_id)

    def _update_states(self) -> None:
        models_dir = Path(self.engine.paths.models)
        installed = set()
        for record in self.records:
            try:
                installed.add(Path(record.path).relative_to(models_dir).as_posix())
            except ValueError:
                continue  # imported from elsewhere: a download of the same repo is still offered
        downloading = {f"{repo}/{path}" for repo, path in self.downloads.jobs}
        self.browser.set_states(installed, downloading)

    # -- downloads ----------------------------------------------------------------------------

    def download(self, repo: str, option: QuantOption, commit: str | None) -> None:
        self.banner.hide()
        if self.downloads.start(repo, option, commit) is None:
            self.show_notice(f"{option.display_name} is already downloading.")

    def _downloaded(self, record: ModelRecord) -> None:
        self.show_notice(f"{model_label(record)} ({record.quantization}) is installed and ready to chat with.")
        self.models_changed.emit()

    # -- importing ----------------------------------------------------------------------------

    def choose_file(self) -> None:
        path, _ = QFileDialog.getOpenFileName(self, "Import a GGUF model", str(Path.home()),
                                              "GGUF models (*.gguf);;All files (*)")
        if path:
            self.import_paths([Path(path)])

    def choose_folder(self) -> None:
        path = QFileDialog.getExistingDirectory(self, "Import every GGUF model in a folder", str(Path.home()))
        if path:
            self.import_paths([Path(path)])

    def import_paths(self, paths: Iterable[Path | str]) -> None:
        """Register files or folders in place (the dialog, and drops on the window, end here)."""
        chosen = [Path(p) for p in paths]
        if not chosen:
            return
        engine = self.engine

        def work() -> ImportResult:
            total = ImportResult()
            for path in chosen:
                result = engine.import_path(path)
                total.imported += result.imported
                total.already += result.already
                total.skipped += result.skipped
                total.adapters += result.adapters
            return total

        self.show_notice("Importing…", sticky=True)
        self.operations.run("models", work, self._imported, self.show_explanation)

    def find_other_apps(self) -> None:
        self.find_button.setEnabled(False)
        self.show_notice("Looking in the Hugging Face cache, LM Studio and Ollama…", sticky=True)
        self.operations.run("models", find_known_places, self._found, self._find_failed)

    def _find_failed(self, explained: Explanation) -> None:
        self.find_button.setEnabled(True)
        self.notice.hide()
        self.show_explanation(explained)

    def _found(self, found: list[FoundModel]) -> None:
        self.find_button.setEnabled(True)
        known = {Path(r.path).resolve() for r in self.records}
        new = [f for f in found if f.path.resolve() not in known]
        if not new:
            where = "no GGUF models" if not found else "nothing new (everything found is already listed)"
            self.show_notice(f"Looked in the Hugging Face cache, LM Studio and Ollama: {where}.")
            return
        by_origin: dict[str, int] = {}
        for item in new:
            by_origin[item.origin] = by_origin.get(item.origin, 0) + 1
        summary = ", ".join(f"{count} in {origin}" for origin, count in by_origin.items())
        if self.confirm:
            box = QMessageBox(QMessageBox.Icon.Question, "Use models from other apps",
                              f"Found {len(new)} model{'s' if len(new) != 1 else ''} ({summary}). Add "
                              f"{'them' if len(new) != 1 else 'it'} to Inglenook? The files stay where they are.",
                              QMessageBox.StandardButton.Yes | QMessageBox.StandardButton.Cancel, self)
            box.setDetailedText("\n".join(str(f.display_name or f.path.name) + f"  ({f.origin})" for f in new))
            if box.exec() != QMessageBox.StandardButton.Yes:
                self.notice.hide()
                return
        engine = self.engine
        self.show_notice("Importing…", sticky=True)
        self.operations.run("models", lambda: engine.import_found(new), self._imported, self.show_explanation)

    def _imported(self, result: ImportResult) -> None:
        self.last_import = result
        pieces = []
        if result.imported:
            names = ", ".join(model_label(r) for r in result.imported[:3])
            more = f" and {len(result.imported) - 3} more" if len(result.imported) > 3 else ""
            pieces.append(f"Added {names}{more}.")
        if result.already:
            pieces.append(f"{len(result.already)} already listed.")
        if result.adapters:  # LoRA adapters: chosen per chat in the chat settings
            names = ", ".join(a.id for a in result.adapters[:3])
            pieces.append(f"LoRA adapter{'s' if len(result.adapters) > 1 else ''} {names}: pick in a chat's settings.")
        if result.skipped:
            path, reason = result.skipped[0]
            more = f" (and {len(result.skipped) - 1} more)" if len(result.skipped) > 1 else ""
            pieces.append(f"Skipped {path.name}: {reason}{more}.")
        added = result.imported or result.adapters
        self.show_notice(" ".join(pieces) or "Nothing to import.", error=bool(result.skipped) and not added)
        if result.adapters and not result.imported:
            self.models_changed.emit()  # the model list is read again, and the adapter picker with it
        if result.imported:
            self.show_tab(self.INSTALLED)
            self.models_changed.emit()

    # -- messages -----------------------------------------------------------------------------

    def show_notice(self, text: str, sticky: bool = False, error: bool = False) -> None:
        self.notice.setText(text)
        self.notice.setProperty("kind", "error" if error else "info")
        self.notice.style().unpolish(self.notice)
        self.notice.style().polish(self.notice)
        self.notice.show()
        self._notice_timer.stop()
        if not sticky:
            self._notice_timer.start(NOTICE_MS)

    def show_error(self, exc: BaseException, retry: Callable[[], None] | None = None) -> None:
        """Explain ``exc`` in the page's banner; "Try again" re-runs ``retry`` when given."""
        log.info("models page error: %s", exc)
        self.show_explanation(actions.explain(exc), retry)

    def show_explanation(self, explanation: Explanation, retry: Callable[[], None] | None = None) -> None:
        """Show an explained failure in the page's banner; "Try again" re-runs ``retry``."""
        if self.notice.isVisible() and self.notice.text().endswith("…"):
            self.notice.hide()
        if retry is None:
            explanation.actions = [a for a in explanation.actions if a[0] != actions.RETRY]
        self._retry = retry
        self.banner.show_explanation(explanation)

    def _banner_action(self, action: str) -> None:
        retry, self._retry = self._retry, None
        if action == actions.RETRY:
            if retry is not None:
                retry()
        elif action != actions.DISMISS:
            self.action_requested.emit(action)  # settings and the like belong to the window

    def shutdown(self) -> None:
        """Cancel running downloads (their partial files stay, to resume next time)."""
        self.downloads.cancel_all()
        self.speech.shutdown()
