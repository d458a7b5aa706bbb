"""Where Inglenook keeps its files.

Every directory comes from platformdirs. Setting ``INGLENOOK_HOME`` moves all of them
under one folder, which is what every test does so that no test touches a real profile.
"""

from __future__ import annotations

import errno
import logging
import os
import shutil
from dataclasses import dataclass
from pathlib import Path

import platformdirs

from ..base import StorageUnavailable

log = logging.getLogger(__name__)

APP_NAME = "Inglenook"
HOME_ENV = "INGLENOOK_HOME"

# Under this much free space a first start cannot create its database and logs: the disk is
# "full" for Inglenook even when a few blocks are left.
NEARLY_FULL_BYTES = 1024 * 1024

# What a person should read for the errors a folder can hit as it is created (the system's
# own strerror, "Read-only file system", says less about what to do).
_FOLDER_REASONS: dict[int, str] = {
    errno.EROFS: "the disk is read-only",
    errno.ENOSPC: "the disk is full",
    errno.EDQUOT: "the disk quota is used up",
    errno.EACCES: "permission denied",
    errno.EPERM: "permission denied",
    errno.ENOTDIR: "a file is in the way",
}


@dataclass(frozen=True)
class Paths:
    data: Path
    models: Path
    cache: Path
    config: Path
    logs: Path

    @property
    def database(self) -> Path:
        return self.data / "inglenook.db"

    @property
    def state_cache(self) -> Path:
        """Saved KV states of conversations and API prefixes."""
        return self.cache / "states"

    @property
    def images(self) -> Path:
        """Images sent in chats, one file per picture (``store/message_images.py``)."""
        return self.data / "images"

    @property
    def downloads(self) -> Path:
        """Partial downloads live here until verified; never scanned as models."""
        return self.models / ".partial"

    @classmethod
    def under(cls, home: Path) -> "Paths":
        home = Path(home).expanduser().absolute()
        return cls(
            data=home / "data",
            models=home / "models",
            cache=home / "cache",
            config=home / "config",
            logs=home / "logs",
        )

    @classmethod
    def default(cls) -> "Paths":
        """The user's directories, or all of them under ``$INGLENOOK_HOME`` when set."""
        home = os.environ.get(HOME_ENV)
        if home:
            return cls.under(Path(home))
        dirs = platformdirs.PlatformDirs(APP_NAME, appauthor=False)
        return cls(
            data=Path(dirs.user_data_dir),
            models=Path(dirs.user_data_dir) / "models",
            cache=Path(dirs.user_cache_dir),
            config=Path(dirs.user_config_dir),
            logs=Path(dirs.user_log_dir),
        )

    def ensure(self) -> "Paths":
        """Create every directory. One that cannot be created or written raises
        StorageUnavailable (the storage, not the data, is the problem: nothing is changed)."""
        for directory in (self.data, self.models, self.cache, self.config, self.logs):
            try:
                directory.mkdir(parents=True, exist_ok=True)
            except OSError as exc:
                reason = _FOLDER_REASONS.get(exc.errno or 0, exc.strerror or str(exc))
                raise StorageUnavailable(f"cannot create directory {directory}: {reason}") from exc
            if not os.access(directory, os.W_OK | os.X_OK):
                raise StorageUnavailable(f"directory is not writable: {directory}")
        _owner_only_folder(self.data)
        return self


def _owner_only_folder(folder: Path) -> None:
    """The data folder (the database, images sent in chats, the secrets file) is the owner's
    alone: others lose read and enter rights. Where modes mean nothing (Windows), nothing."""
    if os.name != "posix":
        return
    try:
        if folder.stat().st_mode & 0o077:
            os.chmod(folder, 0o700)
    except OSError as exc:  # someone else's folder given on purpose: theirs to set
        log.debug("cannot narrow the permissions of %s: %s", folder, exc)


@dataclass(frozen=True)
class DiskState:
    """The disk under a folder, as the system reports it (for telling a person what is wrong)."""

    folder: Path  # the nearest folder that exists: the one measured
    read_only: bool
    free_bytes: int

    @property
    def nearly_full(self) -> bool:
        return self.free_bytes < NEARLY_FULL_BYTES


def disk_state(path: Path) -> DiskState | None:
    """The disk ``path`` is (or would be) on; None when the system cannot say."""
    folder = Path(path).absolute()
    while not folder.exists() and folder.parent != folder:
        folder = folder.parent
    try:
        free = shutil.disk_usage(folder).free
        statvfs = getattr(os, "statvfs", None)  # not on Windows: no read-only flag there
        read_only = bool(statvfs(folder).f_flag & os.ST_RDONLY) if statvfs is not None else False
    except OSError:
        return None
    return DiskState(folder=folder, read_only=read_only, free_bytes=free)
