"""The terminal front end, run as a user runs it: a separate process, real models, real SQLite."""

from __future__ import annotations

import os
import signal
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

from tests.gguf_writer import write_gguf

STARTER = "smollm2-135m-instruct:q4_1"


def inglenook(*args: str, home: Path, timeout: float = 300, env_extra: dict[str, str] | None = None,
              **kwargs) -> subprocess.CompletedProcess:
    env = {**os.environ, "INGLENOOK_HOME": str(home), **(env_extra or {})}
    return subprocess.run(
        [sys.executable, "-m", "inglenook", *args], capture_output=True, text=True, env=env, timeout=timeout, **kwargs
    )


def spawn(*args: str, home: Path) -> subprocess.Popen:
    env = {**os.environ, "INGLENOOK_HOME": str(home), "PYTHONUNBUFFERED": "1"}
    return subprocess.Popen(
        [sys.executable, "-m", "inglenook", *args], stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env
    )


def stored_messages(home: Path) -> list[tuple]:
    db = sqlite3.connect(home / "data" / "inglenook.db")
    try:
        assert db.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
        return db.execute("SELECT conversation_id, role, content, status FROM messages ORDER BY id").fetchall()
    finally:
        db.close()


def test_first_run_lists_the_starter_model(home: Path) -> None:
    result = inglenook("list", home=home)
    assert result.returncode == 0, result.stderr
    assert STARTER in result.stdout and "Q4_1" in result.stdout


def test_one_shot_answer_is_streamed_and_saved(home: Path) -> None:
    result = inglenook("run", "smollm2", "What is the capital of France? Answer in one sentence.", "--temperature", "0",
                       "--max-tokens", "40", "--seed", "1", "--verbose", home=home)
    assert result.returncode == 0, result.stderr
    assert "Paris" in result.stdout
    for label in ("prompt tokens:", "cached prompt tokens:", "time to first token:", "eval rate:"):
        assert label in result.stderr
    messages = stored_messages(home)
    assert [(m[1], m[3]) for m in messages] == [("user", "complete"), ("assistant", "complete")]
    assert messages[1][2].strip() == result.stdout.strip()


def test_continue_adds_to_the_last_conversation(home: Path) -> None:
    inglenook("run", STARTER, "My name is Ada.", "--temperature", "0", "--max-tokens", "20", home=home)
    result = inglenook("run", STARTER, "What is my name?", "--continue", "--temperature", "0",
                       "--max-tokens", "20", home=home)
    assert result.returncode == 0, result.stderr
    messages = stored_messages(home)
    assert len(messages) == 4 and len({m[0] for m in messages}) == 1
    # The second answer saw the whole history: its prompt holds the first exchange.
    db = sqlite3.connect(home / "data" / "inglenook.db")
    (p1, c1), (p2, _) = db.execute(
        "SELECT prompt_tokens, completion_tokens FROM messages WHERE role = 'assistant' ORDER BY id"
    ).fetchall()
    assert p2 > p1 + c1


def test_repl_reads_lines_until_bye(home: Path) -> None:
    result = inglenook("run", STARTER, "--temperature", "0", "--max-tokens", "10",
                       home=home, input="Hello!\n/bye\n")
    assert result.returncode == 0, result.stderr
    assert [m[1] for m in stored_messages(home)] == ["user", "assistant"]


def test_ctrl_c_stops_the_answer_not_the_program(home: Path) -> None:
    process = spawn("run", STARTER, "Write a very long story about a dragon.", "--temperature", "0",
                    "--max-tokens", "2000", home=home)
    assert process.stdout is not None
    process.stdout.read(40)  # the answer has started streaming
    process.send_signal(signal.SIGINT)
    out, err = process.communicate(timeout=120)
    assert process.returncode == 0, err
    assert b"[stopped]" in err
    messages = stored_messages(home)
    assert [(m[1], m[3]) for m in messages] == [("user", "complete"), ("assistant", "partial")]


def test_sigkill_mid_answer_loses_no_completed_message(home: Path) -> None:
    first = inglenook("run", STARTER, "Say hello.", "--temperature", "0", "--max-tokens", "10", home=home)
    assert first.returncode == 0, first.stderr
    before = stored_messages(home)
    process = spawn("run", STARTER, "Now write a very long essay about rivers.", "--continue",
                    "--temperature", "0", "--max-tokens", "2000", home=home)
    assert process.stdout is not None
    process.stdout.read(40)
    process.send_signal(signal.SIGKILL)
    process.wait(timeout=60)
    after = stored_messages(home)  # also asserts PRAGMA integrity_check == ok
    assert after[: len(before)] == before
    # The question sent before the kill was committed when it was sent.
    assert after[len(before)][1:] == ("user", "Now write a very long essay about rivers.", "complete")
    # The app still works afterwards.
    again = inglenook("run", STARTER, "Still there?", "--continue", "--max-tokens", "5", home=home)
    assert again.returncode == 0, again.stderr


def test_a_native_crash_mid_answer_is_reported_on_the_next_start(home: Path) -> None:
    first = inglenook("run", STARTER, "Say hello.", "--temperature", "0", "--max-tokens", "10", home=home)
    assert first.returncode == 0, first.stderr
    process = spawn("run", STARTER, "Now write a very long essay about rivers.", "--continue",
                    "--temperature", "0", "--max-tokens", "2000", home=home)
    assert process.stdout is not None and process.stderr is not None
    process.stdout.read(40)  # the answer is streaming: the fault lands inside the decode loop
    process.send_signal(signal.SIGSEGV)  # what a fault in llama.cpp delivers to the process
    process.wait(timeout=60)
    assert process.returncode == -signal.SIGSEGV
    conversation = stored_messages(home)[0][0]
    fault_log = home / "logs" / f"fault-{process.pid}.log"
    assert "Segmentation fault" in fault_log.read_text()  # faulthandler's report, every thread

    again = inglenook("run", STARTER, "Still there?", "--continue", "--max-tokens", "5", home=home)
    assert again.returncode == 0, again.stderr
    assert "stopped unexpectedly" in again.stderr
    assert f"answering in conversation {conversation}" in again.stderr
    assert str(fault_log) in again.stderr
    # Nothing saved before the crash is lost; the question sent before it was committed.
    roles = [(m[1], m[2]) for m in stored_messages(home)]
    assert roles[2] == ("user", "Now write a very long essay about rivers.")
    # Reported once: the next start is quiet.
    quiet = inglenook("list", home=home)
    assert "stopped unexpectedly" not in quiet.stderr


@pytest.mark.parametrize(
    ("make_target", "expected"),
    [
        (lambda tmp: str(tmp / "missing.gguf"), "model file not found"),
        (lambda tmp: str(_text_file(tmp / "notes.gguf")), "not a GGUF file"),
        (lambda tmp: str(write_gguf(tmp / "cut-F32.gguf", tensors=[("w", (64, 64))], truncate_to=400)), "truncated"),
        (lambda tmp: "no-such-model", "no local model named"),
    ],
)
def test_bad_input_is_one_clear_line(home: Path, tmp_path: Path, make_target, expected: str) -> None:
    inglenook("run", STARTER, "Keep this.", "--max-tokens", "5", home=home)
    saved = stored_messages(home)
    result = inglenook("run", make_target(tmp_path), "hello", home=home)
    assert result.returncode != 0
    assert "Traceback" not in result.stderr
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and expected in lines[0], result.stderr
    assert stored_messages(home) == saved


def test_unwritable_data_directory_is_one_clear_line(tmp_path: Path) -> None:
    blocker = tmp_path / "a-file"
    blocker.write_text("not a directory")
    result = inglenook("list", home=blocker / "home")
    assert result.returncode != 0
    assert "Traceback" not in result.stderr
    assert result.stderr.strip().startswith("inglenook: error: cannot create directory")


def test_show_and_rm(home: Path, tmp_path: Path) -> None:
    shown = inglenook("show", "smollm2", home=home)
    assert shown.returncode == 0
    assert "architecture:   llama" in shown.stdout and "Q4_1" in shown.stdout
    extra = write_gguf(home / "models" / "scratch-F32.gguf")
    assert "scratch:f32" in inglenook("list", home=home).stdout
    removed = inglenook("rm", "scratch:f32", home=home)
    assert removed.returncode == 0 and not extra.exists()
    assert "scratch:f32" not in inglenook("list", home=home).stdout


def test_version(home: Path) -> None:
    from inglenook import __version__

    result = inglenook("--version", home=home)
    assert result.stdout.strip() == f"inglenook {__version__}"


def _text_file(path: Path) -> Path:
    path.write_text("I am a text file, not a model. " * 10)
    return path
