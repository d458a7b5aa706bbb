"""A Hugging Face repository's files as the Models page shows them: the quant table with each
file's size and fit on this machine, and the panel around it with the Download buttons."""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from datetime import datetime

from inglenook.engine import (
    PARTIAL,
    Engine,
    FitEstimate,
    InglenookError,
    MachineMemory,
    QuantOption,
    RepoListing,
    detect_machine,
    downloader_for,
    fit_options,
)
from PySide6.QtCore import Qt, Signal
from PySide6.QtWidgets import (
    QAbstractItemView,
    QFrame,
    QHBoxLayout,
    QHeaderView,
    QLabel,
    QPushButton,
    QStackedWidget,
    QTableWidget,
    QTableWidgetItem,
    QVBoxLayout,
    QWidget,
)

from inglenook.app.text.formatting import human_count, human_size

log = logging.getLogger(__name__)

SORTS = (("Most downloads", "downloads"), ("Most likes", "likes"), ("Recently updated", "updated"))
REPO_ROLE = Qt.ItemDataRole.UserRole + 1


@dataclass
class RepoDetails:
    """What the quant table shows: the listing, and fit estimates when they could be made."""

    listing: RepoListing
    fits: dict[str, FitEstimate] = field(default_factory=dict)
    machine: MachineMemory | None = None
    context: int = 0
    fit_error: BaseException | None = None


def load_details(engine: Engine, repo: str) -> RepoDetails:
    """List the repo's files and estimate each one's fit (blocks: a worker runs it)."""
    hub = downloader_for(engine).hub
    listing = hub.list_files(repo)
    settings = engine.settings
    # Per answer; with 'auto' (0) the estimate assumes the nominal size kv_context uses.
    details = RepoDetails(listing, context=settings.kv_context // max(1, settings.parallel_sequences))
    if not listing.options:
        return details
    try:
        # The shape comes from one file's header (a ranged read); a gated repo refuses it.
        shape = hub.shape(repo, listing)
        details.machine = detect_machine()
        details.fits = fit_options(listing, shape, details.machine, context=settings.kv_context,
                                   kv_type=settings.kv_cache_type, sequences=max(1, settings.parallel_sequences),
                                   speculative=settings.speculative)
    except InglenookError as exc:
        log.info("no fit estimate for %s: %s", repo, exc)
        details.fit_error = exc
    return details


def short_date(when: datetime | None) -> str:
    return when.strftime("%b %-d, %Y") if when is not None else "unknown date"


def fit_verdict_text(fit: FitEstimate) -> str:
    """A badge-sized form of ``FitEstimate.label``."""
    if fit.verdict == PARTIAL:
        return f"Partial offload {fit.gpu_layers}/{fit.total_layers}"
    return fit.label[:1].upper() + fit.label[1:]


class QuantTable(QTableWidget):
    """Quant · size · bits per weight · fit badge · Download, one row per downloadable model."""

    download_requested = Signal(object)  # QuantOption
    COLUMNS = ("Quant", "Size", "Bits/weight", "Fit on this computer", "")

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(0, len(self.COLUMNS), parent)
        self.setObjectName("QuantTable")
        self.setHorizontalHeaderLabels(list(self.COLUMNS))
        self.verticalHeader().hide()
        self.verticalHeader().setDefaultSectionSize(44)
        self.setShowGrid(False)
        self.setSelectionMode(QAbstractItemView.SelectionMode.NoSelection)
        self.setEditTriggers(QAbstractItemView.EditTrigger.NoEditTriggers)
        self.setFocusPolicy(Qt.FocusPolicy.NoFocus)
        self.setHorizontalScrollBarPolicy(Qt.ScrollBarPolicy.ScrollBarAlwaysOff)
        header = self.horizontalHeader()
        header.setHighlightSections(False)
        header.setDefaultAlignment(Qt.AlignmentFlag.AlignLeft | Qt.AlignmentFlag.AlignVCenter)
        header.setMinimumSectionSize(60)
        for column in (0, 1, 2):
            header.setSectionResizeMode(column, QHeaderView.ResizeMode.ResizeToContents)
        header.setSectionResizeMode(3, QHeaderView.ResizeMode.Stretch)
        header.setSectionResizeMode(4, QHeaderView.ResizeMode.Fixed)
        self.setColumnWidth(4, 126)
        self.options: list[QuantOption] = []
        self.repo = ""
        self.buttons: dict[str, QPushButton] = {}
        self.badges: dict[str, QLabel] = {}

    def show_details(self, details: RepoDetails, installed: set[str], downloading: set[str]) -> None:
        self.setRowCount(0)
        self.buttons.clear()
        self.badges.clear()
        self.repo = details.listing.repo
        self.options = [o for group in details.listing.by_quant().values() for o in group]
        self.options.sort(key=lambda o: (o.size, o.name))
        self.setRowCount(len(self.options))
        for row, option in enumerate(self.options):
            self._fill_row(row, option, details.fits.get(option.name), details)
        self.refresh_states(installed, downloading)

    def _fill_row(self, row: int, option: QuantOption, fit: FitEstimate | None, details: RepoDetails) -> None:
        quant = QTableWidgetItem(f"{option.quant}  ·  {len(option.files)} parts" if option.is_split else option.quant)
        font = quant.font()
        font.setBold(True)
        quant.setFont(font)
        quant.setToolTip(option.display_name + ("\nA split set: downloaded and loaded as one model"
                                                if option.is_split else ""))
        self.setItem(row, 0, quant)

        size = QTableWidgetItem(human_size(option.size))
        size.setToolTip(f"{option.size:,} bytes")
        self.setItem(row, 1, size)
        bpw = option.bits_per_weight
        bpw_text = "–" if bpw is None else (f"≈ {bpw:.2f}" if option.bpw_is_nominal else f"{bpw:.2f}")
        bpw_item = QTableWidgetItem(bpw_text)
        if option.bpw_is_nominal and bpw is not None:
            bpw_item.setToolTip("Typical for this quantization (the repo does not state its parameter count)")
        self.setItem(row, 2, bpw_item)

        cell = QWidget(self)
        cell_row = QHBoxLayout(cell)
        cell_row.setContentsMargins(0, 0, 4, 0)
        cell_row.setSpacing(6)
        if fit is not None:
            badge = QLabel(fit_verdict_text(fit), cell)
            badge.setObjectName("FitBadge")
            badge.setProperty("verdict", fit.verdict)
            badge.setToolTip(
                f"{fit.label[:1].upper()}{fit.label[1:]}. About {human_size(fit.total_bytes)} at {fit.context:,} "
                "tokens of context: "
                f"weights {human_size(fit.weights_bytes)}, KV cache {human_size(fit.kv_bytes)}, "
                f"compute {human_size(fit.compute_bytes)}"
                + (f", window checkpoints up to {human_size(fit.checkpoint_bytes)}" if fit.checkpoint_bytes else "")
            )
            badge.ensurePolished()
            badge.setMinimumWidth(badge.sizeHint().width())
            self.badges[option.name] = badge
            cell_row.addWidget(badge, 0, Qt.AlignmentFlag.AlignVCenter)
            need = QLabel(f"≈ {human_size(fit.total_bytes)}", cell)
            need.setToolTip(badge.toolTip())
            need.setObjectName("FitNeed")
            cell_row.addWidget(need, 0, Qt.AlignmentFlag.AlignVCenter)
        else:
            unknown = QLabel("no estimate", cell)
            unknown.setObjectName("FitNeed")
            cell_row.addWidget(unknown)
        cell_row.addStretch(1)
        self.setCellWidget(row, 3, cell)

        holder = QWidget(self)
        holder_row = QHBoxLayout(holder)
        holder_row.setContentsMargins(0, 0, 4, 0)  # the item padding already indents cell widgets
        button = QPushButton("Download", holder)
        button.setFixedWidth(108)
        button.setObjectName("PrimarySmallButton")
        button.setCursor(Qt.CursorShape.PointingHandCursor)
        button.clicked.connect(lambda _=False, o=option: self.download_requested.emit(o))
        holder_row.addWidget(button, 0, Qt.AlignmentFlag.AlignVCenter | Qt.AlignmentFlag.AlignRight)
        self.buttons[option.name] = button
        self.setCellWidget(row, 4, holder)

    def refresh_states(self, installed: set[str], downloading: set[str]) -> None:
        """Installed and downloading rows get a disabled button that says so.

        ``installed`` holds "owner/repo/file.gguf" for files in the models folder, where a
        download of this repo lands; ``downloading`` holds "owner/repo/<first file>" of each running one.
        """
        for option in self.options:
            button = self.buttons.get(option.name)
            if button is None:
                continue
            base = option.name.rsplit("/", 1)[-1]
            if f"{self.repo}/{option.name}" in downloading:
                button.setText("Downloading")
                button.setEnabled(False)
            elif f"{self.repo}/{base}" in installed:
                button.setText("Installed")
                button.setEnabled(False)
            else:
                button.setText("Download")
                button.setEnabled(True)

    def row_of(self, quant: str) -> int:
        return next(i for i, o in enumerate(self.options) if o.quant == quant)


class RepoPanel(QFrame):
    """The selected repo: its facts, the fit basis, and the quant table."""

    download_requested = Signal(str, object, object)  # repo, QuantOption, commit

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setObjectName("Card")
        self.stack = QStackedWidget(self)
        outer = QVBoxLayout(self)
        outer.setContentsMargins(0, 0, 0, 0)
        outer.addWidget(self.stack)

        self.placeholder = QLabel("Choose a model on the left to see its files and whether each one fits this "
                                  "computer.", self)
        self.placeholder.setObjectName("PlaceholderText")
        self.placeholder.setAlignment(Qt.AlignmentFlag.AlignCenter)
        self.placeholder.setWordWrap(True)  # a narrow window's panel is ~220 px wide
        self.stack.addWidget(self.placeholder)

        body = QWidget(self)
        layout = QVBoxLayout(body)
        layout.setContentsMargins(18, 16, 18, 12)
        layout.setSpacing(6)
        self.title = QLabel("", body)
        self.title.setObjectName("RepoTitle")
        self.title.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        self.facts = QLabel("", body)
        self.facts.setObjectName("PageHint")
        self.notice = QLabel("", body)
        self.notice.setObjectName("RepoNotice")
        self.notice.setWordWrap(True)
        self.notice.hide()
        self.basis = QLabel("", body)
        self.basis.setObjectName("FitBasis")
        self.basis.setWordWrap(True)
        self.table = QuantTable(body)
        self.table.download_requested.connect(self._download)
        self.empty = QLabel("This repository has no GGUF model files.", body)
        self.empty.setObjectName("PageHint")
        layout.addWidget(self.title)
        layout.addWidget(self.facts)
        layout.addWidget(self.notice)
        layout.addSpacing(4)
        layout.addWidget(self.basis)
        layout.addWidget(self.table, 1)
        layout.addWidget(self.empty)
        self.stack.addWidget(body)
        self.body = body

        self.loading = QLabel("Reading the file list…", self)
        self.loading.setObjectName("PlaceholderText")
        self.loading.setAlignment(Qt.AlignmentFlag.AlignCenter)
        self.stack.addWidget(self.loading)
        self.details: RepoDetails | None = None

    def show_loading(self, repo: str) -> None:
        self.details = None
        self.loading.setText(f"Reading the files of {repo}…")
        self.stack.setCurrentWidget(self.loading)

    def show_placeholder(self, text: str | None = None) -> None:
        self.details = None
        if text:
            self.placeholder.setText(text)
        self.stack.setCurrentWidget(self.placeholder)

    def show_details(self, details: RepoDetails, installed: set[str], downloading: set[str]) -> None:
        self.details = details
        listing = details.listing
        self.title.setText(listing.repo)
        facts = []
        if listing.parameters:
            facts.append(f"{human_count(listing.parameters)} parameters")
        if listing.architecture:
            facts.append(listing.architecture)
        if listing.context_length:
            facts.append(f"{listing.context_length:,} tokens context")
        facts.append(f"licence {listing.licence}" if listing.licence else "licence not stated")
        facts.append(f"{len(listing.options)} file{'s' if len(listing.options) != 1 else ''}")
        self.facts.setText("  ·  ".join(facts))
        if listing.gated:
            self.notice.setText("Gated: accept the licence on Hugging Face and set an access token "
                                "(HF_TOKEN or the hf_token setting) before downloading.")
            self.notice.show()
        else:
            self.notice.hide()
        machine = details.machine
        if machine is not None:
            gpu = (f"{human_size(machine.vram_free_bytes)} GPU memory free" if machine.has_gpu and machine.gpus
                   else "no GPU in use")
            self.basis.setText(f"Fit at {details.context:,} tokens of context, for this computer: "
                               f"{human_size(machine.ram_available_bytes)} RAM free, {gpu}.")
        elif details.fit_error is not None:
            self.basis.setText("No fit estimate: the model's header could not be read.")
        else:
            self.basis.setText("")
        self.basis.setVisible(bool(self.basis.text()))
        self.table.show_details(details, installed, downloading)
        self.table.setVisible(bool(listing.options))
        self.empty.setVisible(not listing.options)
        self.stack.setCurrentWidget(self.body)

    def _download(self, option: QuantOption) -> None:
        if self.details is not None:
            self.download_requested.emit(self.details.listing.repo, option, self.details.listing.commit)
