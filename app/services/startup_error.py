"""The words of the dialog shown when Inglenook cannot start (no Qt here: a pure function).

At first start the usual cause is the disk: a read-only home, a full disk, a folder without
permissions. The error's own type is explained by ``errors.explain`` (the one mapping); this
adds what the system reports about the disk under the data folder, because SQLite's errors do
not always say (a full disk can surface as an I/O error when its shared-memory file cannot
grow), and it always names the folder, so the person knows where to look.
"""

from __future__ import annotations

from dataclasses import dataclass

from inglenook.engine import DiskState, Paths, disk_state, human_size

from inglenook.app.services.errors import Explanation


NO_BREAK = "\u00a0"


@dataclass(frozen=True)
class StartupMessage:
    headline: str
    body: str


def disk_trouble(paths: Paths) -> DiskState | None:
    """The first of Inglenook's folders whose disk is read-only or nearly full, if any."""
    for folder in (paths.data, paths.models, paths.cache, paths.config, paths.logs):
        state = disk_state(folder)
        if state is not None and (state.read_only or state.nearly_full):
            return state
    return None


def startup_message(explanation: Explanation, exc: BaseException, paths: Paths,
                    disk: DiskState | None) -> StartupMessage:
    where = f"Inglenook keeps its chats, settings and models in {paths.data}."
    detail = f"Details: {exc}"
    if disk is None or not (disk.read_only or disk.nearly_full):
        return StartupMessage(explanation.title, f"{explanation.text}\n\n{where}\n\n{detail}")
    which = "That folder's disk" if disk.folder == paths.data else f"The disk that holds {disk.folder}"
    if disk.read_only:
        return StartupMessage(
            "The disk for Inglenook's data is read-only",
            f"{where} {which} is mounted read-only, so nothing can be saved there. Make that disk "
            "writable (or start Inglenook as a user whose home folder is on a writable disk), then "
            f"click Try again.\n\n{detail}",
        )
    free = human_size(disk.free_bytes).replace(" ", NO_BREAK)  # "0 B" on one line
    return StartupMessage(
        "The disk for Inglenook's data is full",
        f"{where} {which} has {free} free: too little to create the database "
        "and logs. Free some space on it, then click Try again. Nothing is lost: a database begun "
        f"on a full disk is finished then.\n\n{detail}",
    )
