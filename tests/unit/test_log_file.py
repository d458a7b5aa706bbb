"""The log file on a full disk: one line on the terminal, not a traceback per record."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest

from inglenook.cli.log_file import LogFileHandler

FULL_DISK = Path("/dev/full")  # every write to it fails with ENOSPC, as on a full disk


@pytest.mark.skipif(not FULL_DISK.exists(), reason="needs /dev/full (Linux)")
def test_a_full_disk_is_said_once_and_the_records_go_on(capsys: pytest.CaptureFixture[str]) -> None:
    logger = logging.getLogger("test_log_file.full")
    logger.propagate = False
    handler = LogFileHandler(str(FULL_DISK), max_bytes=5_000_000, backup_count=3)
    logger.addHandler(handler)
    try:
        for i in range(5):
            logger.warning("record %d", i)
    finally:
        logger.removeHandler(handler)
        handler.close()
    err = capsys.readouterr().err
    assert "--- Logging error ---" not in err and "Traceback" not in err
    assert err.count("cannot write the log file /dev/full") == 1
    assert "No space left on device" in err


def test_the_file_is_written_again_once_it_can_be(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    # A log folder that disappears (a cleaner removed it) and comes back.
    folder = tmp_path / "logs"
    folder.mkdir()
    path = folder / "inglenook.log"
    logger = logging.getLogger("test_log_file.gone")
    logger.propagate = False
    handler = LogFileHandler(str(path), max_bytes=5_000_000, backup_count=3)
    handler.setFormatter(logging.Formatter("%(message)s"))
    logger.addHandler(handler)
    try:
        logger.warning("first")
        handler.close()  # the open file would survive the removal; a fresh open must fail
        path.unlink()
        folder.rmdir()
        logger.warning("lost")
        logger.warning("lost too")
        folder.mkdir()
        logger.warning("back")
    finally:
        logger.removeHandler(handler)
        handler.close()
    err = capsys.readouterr().err
    assert err.count("cannot write the log file") == 1 and "Traceback" not in err
    assert "writing the log file" in err and "again" in err
    assert path.read_text() == "back\n"
