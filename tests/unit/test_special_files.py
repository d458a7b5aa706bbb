"""Files a person names are checked before they are read (issue 45): real ``/dev/zero``, a
real FIFO, a real sparse file far over each limit. That a file was not read is measured by
what the kernel counted this process reading (``/proc/self/io``'s ``rchar``), not by time."""

from __future__ import annotations

import os
import stat
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from inglenook.cli import main
from inglenook.engine import InvalidRequest, McpError, read_image_file, read_mcp_file
from inglenook.engine.documents import DocumentLibrary, convert_file
from inglenook.engine.store import Paths, Store

pytestmark = [pytest.mark.timeout(60),
              pytest.mark.skipif(not Path("/proc/self/io").exists(), reason="Linux: /proc/self/io, /dev/zero")]

SPARSE_BYTES = 512 << 20  # over every limit here (images 20 MB, documents 200 MB, mcpServers 1 MB)


def read_so_far() -> int:
    for line in Path("/proc/self/io").read_text().splitlines():
        if line.startswith("rchar:"):
            return int(line.split()[1])
    raise AssertionError("no rchar in /proc/self/io")


@pytest.fixture
def fifo(tmp_path: Path) -> Path:
    path = tmp_path / "pipe.png"
    os.mkfifo(path)
    return path


@pytest.fixture
def sparse(tmp_path: Path) -> Path:
    path = tmp_path / "huge.png"
    with open(path, "wb") as handle:
        handle.truncate(SPARSE_BYTES)
    return path


@pytest.fixture
def store(tmp_path: Path) -> Iterator[Store]:
    opened = Store(tmp_path / "data" / "inglenook.db")
    yield opened
    opened.close()


def refused_without_reading(action, error: type[Exception], words: str) -> None:
    before = read_so_far()
    with pytest.raises(error, match=words):
        action()
    assert read_so_far() - before < 16 << 20


# -- images (run --image, the window's attachments) ---------------------------------------


def test_an_image_from_dev_zero_is_refused_as_a_device() -> None:
    refused_without_reading(lambda: read_image_file("/dev/zero"), InvalidRequest, "is a device")


def test_an_image_from_a_fifo_is_refused_not_waited_for(fifo: Path) -> None:
    refused_without_reading(lambda: read_image_file(fifo), InvalidRequest, "is a named pipe")


def test_a_huge_image_file_is_refused_by_its_size_before_it_is_read(sparse: Path) -> None:
    refused_without_reading(lambda: read_image_file(sparse), InvalidRequest, "at most 20 MB")


def test_run_with_an_image_from_a_fifo_is_refused(fifo: Path) -> None:
    from inglenook.cli import _read_images

    with pytest.raises(InvalidRequest, match="named pipe"):
        _read_images([str(fifo)])


# -- mcp import ----------------------------------------------------------------------------


@pytest.mark.parametrize("where", ["/dev/zero", "fifo", "sparse"])
def test_mcp_import_checks_the_file_first(where: str, fifo: Path, sparse: Path, home: Path,
                                          capsys: pytest.CaptureFixture[str]) -> None:
    path = {"/dev/zero": Path("/dev/zero"), "fifo": fifo, "sparse": sparse}[where]
    refused_without_reading(lambda: read_mcp_file(path), McpError, "device|named pipe|at most 1 MB")
    before = read_so_far()
    assert main(["mcp", "import", str(path)]) == 1
    assert read_so_far() - before < 16 << 20
    err = capsys.readouterr().err
    assert len(err.strip().splitlines()) == 1 and "Traceback" not in err


# -- docs add ------------------------------------------------------------------------------


@pytest.mark.parametrize("where, words", [("/dev/zero", "is a device"), ("fifo", "is a named pipe"),
                                          ("sparse", "at most 200 MB")])
def test_a_collection_checks_each_file_before_hashing_it(where: str, words: str, fifo: Path, sparse: Path,
                                                         store: Store) -> None:
    path = {"/dev/zero": Path("/dev/zero"), "fifo": fifo, "sparse": sparse}[where]
    before = read_so_far()
    [added] = DocumentLibrary(store).add_files("c", [path], convert_file)
    assert read_so_far() - before < 16 << 20
    assert added.outcome == "failed" and words in added.detail, added


def test_a_link_out_of_its_folder_is_not_followed_into_a_collection(tmp_path: Path, store: Store) -> None:
    (tmp_path / "elsewhere").mkdir()
    secret = tmp_path / "elsewhere" / "secret.txt"
    secret.write_text("root:$6$not-for-a-model\n")
    folder = tmp_path / "notes"
    folder.mkdir()
    (folder / "real.txt").write_text("The cat is called Miso.\n")
    (folder / "shadow.txt").symlink_to(secret)
    (folder / "alias.txt").symlink_to(folder / "real.txt")  # a link within the folder is fine

    alias, real, shadow = DocumentLibrary(store).add_files(
        "notes", [folder / "alias.txt", folder / "real.txt", folder / "shadow.txt"], convert_file)

    assert shadow.outcome == "failed" and str(secret) in shadow.detail and "outside its folder" in shadow.detail
    assert alias.outcome in ("added", "unchanged") and real.outcome in ("added", "unchanged")
    with store.reading() as conn:
        texts = [row[0] for row in conn.execute("SELECT text FROM documents")]
    assert texts and not any("not-for-a-model" in text for text in texts)


# -- the data folder -----------------------------------------------------------------------


@pytest.mark.skipif(sys.platform == "win32", reason="POSIX modes")
def test_the_database_and_data_folder_are_the_owners_alone(tmp_path: Path) -> None:
    old = os.umask(0o022)  # a common umask: files 0644, folders 0755
    try:
        paths = Paths.under(tmp_path / "home").ensure()
        opened = Store(paths.database)
        try:
            with opened.writing() as conn:
                conn.execute("CREATE TABLE IF NOT EXISTS probe (x)")
            modes = {p.name: stat.S_IMODE(p.stat().st_mode) for p in paths.data.iterdir()
                     if p.name.startswith("inglenook.db")}
        finally:
            opened.close()
    finally:
        os.umask(old)
    assert stat.S_IMODE(paths.data.stat().st_mode) == 0o700
    assert modes and all(mode == 0o600 for mode in modes.values()), modes


def test_docs_list_shows_control_characters_in_names_not_their_effect(tmp_path: Path, home: Path,
                                                                      capsys: pytest.CaptureFixture[str]) -> None:
    evil = tmp_path / "notes\x1b]0;pwned\x07\x1b[2J.txt"
    evil.write_text("The cat is called Miso.\n")
    assert main(["docs", "add", "c", str(evil)]) == 0
    assert main(["docs", "list", "c"]) == 0
    out, err = capsys.readouterr()
    assert "\x1b" not in out + err and "\x07" not in out + err
    assert "notes\\x1b]0;pwned\\x07\\x1b[2J.txt" in out
