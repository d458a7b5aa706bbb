"""Documents from the terminal (issue 30): ``run --file`` and ``docs add|list|rm``, run as a
user runs them (a separate process, the real SmolLM2, real SQLite, real files)."""

from __future__ import annotations

import os
import re
from pathlib import Path

from tests.document_files import docx_file, report_pdf

from .test_cli import inglenook, stored_messages

ASK = ("--temperature", "0", "--max-tokens", "12", "--seed", "1", "--verbose")


def cached_tokens(stderr: str) -> int:
    found = re.search(r"cached prompt tokens:\s+(\d+)", stderr)
    assert found, stderr
    return int(found.group(1))


def test_run_with_files_reads_them_once_across_runs(home: Path, tmp_path: Path) -> None:
    lease = docx_file(tmp_path / "lease.docx")
    report = report_pdf(tmp_path / "report.pdf", n_pages=3)
    files = ("--file", str(lease), "--file", str(report))
    first = inglenook("run", "smollm2", *files, "What is the cat called?", *ASK, home=home)
    assert first.returncode == 0, first.stderr
    assert "read lease.docx (docx" in first.stderr and "read report.pdf (pdf, 3 pages" in first.stderr
    assert cached_tokens(first.stderr) == 0
    # Another process, another question, the same documents: their prefill comes from disk.
    second = inglenook("run", "smollm2", *files, "Which region sold most?", *ASK, home=home)
    assert second.returncode == 0, second.stderr
    assert cached_tokens(second.stderr) > 300
    cold = inglenook("run", "smollm2", *files, "Which region sold most?", *ASK, "--no-cache", home=home)
    assert cached_tokens(cold.stderr) == 0 and cold.stdout == second.stdout


def test_a_file_that_cannot_be_read_stops_the_run_before_anything_is_saved(home: Path, tmp_path: Path) -> None:
    (tmp_path / "photo.txt").write_bytes(bytes(range(256)) * 64)
    result = inglenook("run", "smollm2", "--file", str(tmp_path / "photo.txt"), "What is this?", *ASK, home=home)
    assert result.returncode == 1
    assert "photo.txt is a binary file" in result.stderr and "Traceback" not in result.stderr
    assert stored_messages(home) == []


def test_collections_convert_a_file_again_only_when_it_changed(home: Path, tmp_path: Path) -> None:
    lease = docx_file(tmp_path / "lease.docx")
    notes = tmp_path / "notes.md"
    notes.write_text("# Notes\n\nThe boiler is serviced every October.\n", encoding="utf-8")
    added = inglenook("docs", "add", "house", str(lease), str(notes), home=home)
    assert added.returncode == 0, added.stderr
    assert added.stdout.split() == ["added", str(lease), "added", str(notes)]

    again = inglenook("docs", "add", "house", str(lease), str(notes), home=home)
    assert again.stdout.split() == ["unchanged", str(lease), "unchanged", str(notes)]
    stat = notes.stat()
    os.utime(notes, (stat.st_atime, stat.st_mtime + 10))  # touched, same bytes: still unchanged
    assert inglenook("docs", "add", "house", str(notes), home=home).stdout.split() == ["unchanged", str(notes)]
    notes.write_text("# Notes\n\nThe boiler is serviced every November.\n", encoding="utf-8")
    assert inglenook("docs", "add", "house", str(notes), home=home).stdout.split() == ["updated", str(notes)]

    listing = inglenook("docs", "list", home=home)
    assert listing.returncode == 0 and re.search(r"house\s+2\s", listing.stdout), listing.stdout
    files = inglenook("docs", "list", "house", home=home)
    assert str(lease) in files.stdout and "docx" in files.stdout and "markdown" in files.stdout

    answer = inglenook("run", "smollm2", "--collection", "house", "When is the boiler serviced?", *ASK, home=home)
    assert answer.returncode == 0, answer.stderr

    removed = inglenook("docs", "rm", "house", str(notes), home=home)
    assert removed.returncode == 0 and "removed 1 file(s) from house" in removed.stdout
    gone = inglenook("docs", "rm", "house", home=home)
    assert gone.returncode == 0 and "removed the collection house (1 file(s))" in gone.stdout
    assert "No collections yet" in inglenook("docs", "list", home=home).stdout
    missing = inglenook("docs", "rm", "house", home=home)
    assert missing.returncode == 1 and "no collection named 'house'" in missing.stderr
