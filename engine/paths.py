"""Where Inglenook keeps its files.

Every directory comes from platformdirs. Setting ``INGLENOOK_HOME`` moves all of them
under one folder, which is what every test does so that no test touches a real profile.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

import platformdirs

from .errors import StoreError

APP_NAME = "Inglenook"
HOME_ENV = "INGLENOOK_HOME"


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
        """Create every directory; a clear StoreError when one cannot be written."""
        for directory in (self.data, self.models, self.cache, self.config, self.logs):
            try:
                directory.mkdir(parents=True, exist_ok=True)
            except OSError as exc:
                raise StoreError(f"cannot create directory {directory}: {exc.strerror}") from exc
            if not os.access(directory, os.W_OK | os.X_OK):
                raise StoreError(f"directory is not writable: {directory}")
        return self
