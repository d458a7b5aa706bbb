"""Property-based test of opening a damaged database: random bytes over random pages.

Whatever is damaged, opening never raises anything but the store's own errors, the damaged
file is kept when it is set aside, and no more messages come back than were written
(salvage recovers rows, it never invents them). Bytes changed inside a row's text are not
detectable at all (SQLite pages carry no checksum), so the texts themselves are not compared.
The store is opened with the app's full check: the terminal's quick check does not compare
indexes with their tables, by design.

The examples are damage the random search once found: an index entry lost (only the full
check sees it), a renamed column in the schema text (no check of SQLite's sees it), and a
tree whose keys come back out of order (salvage walked it forever).
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from inglenook.engine.base.errors import StoreError
from inglenook.engine.store.store import Store

EXAMPLES = min(int(os.environ.get("INGLENOOK_FUZZ_EXAMPLES", "25")), 25 * 20)
PAGE = 4096
OUT_OF_ORDER_KEYS = bytes.fromhex(
    "f000c5ed000000004365f23ef800c84885d1314a0000000000df0062c58f854e8c00453d2a000000f016f5003010934c"
    "c800b91e680073a3000000a918000000f700003f00760015eb005eb6f300000500000200007446005d6b940000cb5ae0"
    "3e37210070b500a58dbf2d65d5"
)


def _pristine(folder: Path) -> tuple[Path, list[str]]:
    path = folder / "pristine.sqlite"
    texts = [f"message {i}: " + "word " * (i % 40) for i in range(300)]
    if not path.exists():
        store = Store(path)
        conversation = store.create_conversation("fuzzed")
        for text in texts:
            store.add_message(conversation.id, "user", text)
        store.close()
    return path, texts


@settings(max_examples=EXAMPLES, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(damage=st.lists(st.tuples(st.integers(0, 60), st.integers(0, PAGE - 1), st.binary(min_size=1, max_size=600)),
                       min_size=1, max_size=4))
@example(damage=[(5, 2355, b"\x00")])
@example(damage=[(22, 3660, b"\xdf\x12"), (24, 1086, b"\x80\x19"), (28, 3669, b"k")])
@example(damage=[(35, 3935, OUT_OF_ORDER_KEYS)])
def test_opening_a_damaged_database(tmp_path: Path, damage: list[tuple[int, int, bytes]]) -> None:
    pristine, texts = _pristine(tmp_path)
    case = tmp_path / "case"
    shutil.rmtree(case, ignore_errors=True)
    case.mkdir()
    path = case / "db.sqlite"
    shutil.copy(pristine, path)
    data = bytearray(path.read_bytes())
    for page, offset, junk in damage:
        start = min(page * PAGE + offset, len(data) - 1)
        data[start : start + len(junk)] = junk[: len(data) - start]
    path.write_bytes(bytes(data))
    try:
        store = Store(path, full_check=True)
    except StoreError:
        return  # e.g. damage the open itself reports; the file is left for the person to see
    try:
        assert store.integrity_ok()  # what the store works on is never the damaged file
        kept = [m.content for c in store.list_conversations() for m in store.messages(c.id)]
    finally:
        store.close()
    assert len(kept) <= len(texts)
    if store.set_aside is not None:
        assert store.set_aside.exists()
