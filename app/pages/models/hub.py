"""Finding models on Hugging Face: search with a sort, the results, and a repo's quant table.

Every hub call blocks, so each runs on the network lane; a response that arrives after
the user has moved on (a newer search, another repo selected) is dropped.
"""

from __future__ import annotations

import logging
from collections.abc import Callable

from inglenook.engine import (
    Engine,
    HubModel,
    downloader_for,
)
from PySide6.QtCore import QSize, Qt, Signal
from PySide6.QtWidgets import (
    QAbstractItemView,
    QComboBox,
    QHBoxLayout,
    QLabel,
    QLineEdit,
    QListWidget,
    QListWidgetItem,
    QPushButton,
    QVBoxLayout,
    QWidget,
)

from inglenook.app.widgets import icons
from inglenook.app.widgets.elided import ElidedLabel
from inglenook.app.text.formatting import human_count
from inglenook.app.pages.models.repo import RepoDetails, RepoPanel, load_details, short_date
from inglenook.app.services.operations import Operations

log = logging.getLogger(__name__)

SORTS = (("Most downloads", "downloads"), ("Most likes", "likes"), ("Recently updated", "updated"))
REPO_ROLE = Qt.ItemDataRole.UserRole + 1
DISCOVER_NOTE = ("Discover asks Hugging Face (huggingface.co) for models: opening it lists the most "
                 "downloaded ones, and each search or model you open is another request. Your chats are never sent.")


RESULTS_MIN_WIDTH = 230  # holds a repo name such as "SmolLM2-135M-Instruct-GGUF" whole


class ResultItem(QWidget):
    """One search result: the repo, then downloads, likes, last update and licence."""

    def __init__(self, model: HubModel, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setObjectName("ResultItem")
        self.setAttribute(Qt.WidgetAttribute.WA_TransparentForMouseEvents)
        layout = QVBoxLayout(self)
        layout.setContentsMargins(12, 8, 12, 8)
        layout.setSpacing(3)
        owner, _, name = model.repo.partition("/")
        top = QHBoxLayout()
        top.setSpacing(6)
        title = ElidedLabel(name, self)
        title.setObjectName("ResultName")
        top.addWidget(title, 1)
        if model.gated:
            gated = QLabel("gated", self)
            gated.setObjectName("MutedBadge")
            top.addWidget(gated)
        layout.addLayout(top)
        facts = [owner]
        facts.append(f"↓ {human_count(model.downloads)}" if model.downloads is not None else "↓ –")
        facts.append(f"♥ {human_count(model.likes)}" if model.likes is not None else "♥ –")
        facts.append(short_date(model.last_modified))
        facts.append(model.licence or "licence unknown")
        meta = ElidedLabel("  ·  ".join(facts), self)
        meta.setObjectName("ResultMeta")
        layout.addWidget(meta)
        self.setToolTip(f"{model.repo}\nlast updated {short_date(model.last_modified)}"
                        f"\nlicence: {model.licence or 'not stated'}")


class HubBrowser(QWidget):
    """Search, results on the left, the selected repo on the right."""

    download_requested = Signal(str, object, object)  # repo, QuantOption, commit
    failed = Signal(object)  # BaseException

    def __init__(self, engine: Engine, operations: Operations, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.engine = engine
        self.operations = operations  # searches and listings wait on Hugging Face: the network lane
        self.installed_files: set[str] = set()
        self.downloading: set[str] = set()
        self._search_seq = 0
        self._repo_seq = 0
        self.results: list[HubModel] = []
        self.retry: Callable[[], None] | None = None  # what "Try again" re-runs after a failure

        layout = QVBoxLayout(self)
        layout.setContentsMargins(0, 0, 0, 0)
        layout.setSpacing(12)
        search_row = QHBoxLayout()
        search_row.setSpacing(8)
        self.search = QLineEdit(self)
        self.search.setObjectName("HubSearch")
        self.search.setPlaceholderText("Search GGUF models on Hugging Face — e.g. qwen, llama, gemma")
        self.search.setClearButtonEnabled(True)
        self.search.addAction(icons.make_icon("search", "#8a8a96", 16), QLineEdit.ActionPosition.LeadingPosition)
        self.search.returnPressed.connect(self.run_search)
        self.sort = QComboBox(self)
        self.sort.setObjectName("SortBox")
        for label, key in SORTS:
            self.sort.addItem(label, key)
        self.sort.currentIndexChanged.connect(lambda _: self.run_search())
        self.search_button = QPushButton("Search", self)
        self.search_button.setObjectName("PrimaryButton")
        self.search_button.setCursor(Qt.CursorShape.PointingHandCursor)
        self.search_button.clicked.connect(self.run_search)
        search_row.addWidget(self.search, 1)
        search_row.addWidget(self.sort)
        search_row.addWidget(self.search_button)
        layout.addLayout(search_row)
        # Said where it happens: this tab is the one place that goes online without a download.
        self.network_note = QLabel(DISCOVER_NOTE, self)
        self.network_note.setObjectName("PageHint")
        self.network_note.setWordWrap(True)
        layout.addWidget(self.network_note)

        split = QHBoxLayout()
        split.setSpacing(14)
        left = QVBoxLayout()
        left.setSpacing(6)
        self.results_label = QLabel("RESULTS", self)
        self.results_label.setObjectName("SectionLabel")
        self.list = QListWidget(self)
        self.list.setObjectName("HubResults")
        self.list.setVerticalScrollMode(QAbstractItemView.ScrollMode.ScrollPerPixel)
        self.list.setHorizontalScrollBarPolicy(Qt.ScrollBarPolicy.ScrollBarAlwaysOff)
        # In an 800-px window with the chat list open the row has ~460 px: without a floor
        # the panel's own minimum left the results 143 px, every name cut to "SmolLM2-13…".
        self.list.setMinimumWidth(RESULTS_MIN_WIDTH)
        self.list.currentItemChanged.connect(self._selected)
        self.list_hint = QLabel("Search to see models here.", self)
        self.list_hint.setObjectName("PlaceholderText")
        self.list_hint.setWordWrap(True)
        self.list_hint.setAlignment(Qt.AlignmentFlag.AlignCenter)
        left.addWidget(self.results_label)
        left.addWidget(self.list, 1)
        left.addWidget(self.list_hint, 1)
        self.list.hide()
        self.panel = RepoPanel(self)
        self.panel.download_requested.connect(self.download_requested)
        split.addLayout(left, 5)
        split.addWidget(self.panel, 7)
        layout.addLayout(split, 1)

    # -- search -----------------------------------------------------------------------------

    @property
    def searched(self) -> bool:
        return self._search_seq > 0

    def run_search(self) -> None:
        self._search_seq += 1
        seq = self._search_seq
        text, sort = self.search.text().strip(), self.sort.currentData()
        engine = self.engine
        self.results_label.setText("SEARCHING…")

        def done(found: list[HubModel]) -> None:
            if seq == self._search_seq:
                self.show_results(found)

        def failed(exc: BaseException) -> None:
            if seq == self._search_seq:
                self.results_label.setText("RESULTS")
                self.retry = self.run_search
                self.failed.emit(exc)

        search = downloader_for(engine).hub.search
        self.operations.run_typed("network", lambda: search(text=text, sort=sort, limit=30), done, failed)

    def show_results(self, found: list[HubModel]) -> None:
        self.results = found
        self.list.blockSignals(True)
        self.list.clear()
        for model in found:
            item = QListWidgetItem(self.list)
            item.setData(REPO_ROLE, model.repo)
            widget = ResultItem(model, self.list)
            item.setSizeHint(QSize(0, widget.sizeHint().height() + 2))
            self.list.setItemWidget(item, widget)
        self.list.blockSignals(False)
        count = len(found)
        self.results_label.setText(f"{count} RESULT{'S' if count != 1 else ''}")
        self.list.setVisible(bool(found))
        self.list_hint.setVisible(not found)
        if not found:
            self.list_hint.setText("No GGUF models match this search.")

    def repos(self) -> list[str]:
        return [self.list.item(i).data(REPO_ROLE) for i in range(self.list.count())]

    def select_repo(self, repo: str) -> None:
        for i in range(self.list.count()):
            if self.list.item(i).data(REPO_ROLE) == repo:
                self.list.setCurrentRow(i)
                return
        self.open_repo(repo)

    # -- a repo -------------------------------------------------------------------------------

    def _selected(self, current: QListWidgetItem | None, _previous: QListWidgetItem | None) -> None:
        if current is not None:
            self.open_repo(current.data(REPO_ROLE))

    def open_repo(self, repo: str) -> None:
        self._repo_seq += 1
        seq = self._repo_seq
        engine = self.engine
        self.panel.show_loading(repo)

        def done(details: RepoDetails) -> None:
            if seq == self._repo_seq:
                self.panel.show_details(details, self.installed_files, self.downloading)

        def failed(exc: BaseException) -> None:
            if seq == self._repo_seq:
                self.panel.show_placeholder(f"The files of {repo} could not be listed.")
                self.retry = lambda: self.open_repo(repo)
                self.failed.emit(exc)

        self.operations.run_typed("network", lambda: load_details(engine, repo), done, failed)

    def set_states(self, installed: set[str], downloading: set[str]) -> None:
        """Mark quant rows as installed ("owner/repo/file.gguf") or downloading ("owner/repo/<first file>")."""
        self.installed_files = installed
        self.downloading = downloading
        self.panel.table.refresh_states(self.installed_files, self.downloading)
