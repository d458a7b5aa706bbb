"""The packaged program's entry point: one executable for the window and the command line.

- no arguments, or only ``.gguf`` files (a double-click, "Open with"): the desktop app;
- ``-m MODULE ARGS…``: run an Inglenook module as ``python -m`` would. The quantization lab
  starts its quantizer as ``sys.executable -m inglenook.engine.lab.quantize``; in a bundle
  ``sys.executable`` is this program, so it has to understand that form;
- anything else: the ``inglenook`` command line (``inglenook doctor``, ``inglenook serve``…).

The upgrade test (tests/package/test_upgrade_keeps_data.py) needs a newer build whose store
has one more migration. Rather than a second PyInstaller run, ``make package-upgrade`` repacks
the same bundle as a higher version with the file ``UPGRADE_TEST_MARKER`` in ``_internal``
(installer/deb/build_deb.py --upgrade-test); only a bundle holding that file appends the
migration. A release bundle never holds it.
"""

from __future__ import annotations

import runpy
import sys
from pathlib import Path

UPGRADE_TEST_MARKER = "inglenook-upgrade-test"


def add_upgrade_test_migration(bundle: Path | None) -> bool:
    """Append ``m999_upgrade_test_marker`` to the store's migrations when ``bundle`` (the
    running bundle's ``_internal``; None outside a bundle) holds the marker file."""
    if bundle is None or not (bundle / UPGRADE_TEST_MARKER).is_file():
        return False
    import sqlite_utils  # only in the upgrade test's build

    from inglenook.engine.store.migrations import MIGRATIONS

    def m999_upgrade_test_marker(db: sqlite_utils.Database) -> None:
        """Proves the newer build's migrations ran on the older build's store."""
        db.conn.execute("CREATE TABLE upgrade_test_marker (note TEXT)")
        db.conn.execute("INSERT INTO upgrade_test_marker VALUES ('applied by the newer build')")

    MIGRATIONS.append(m999_upgrade_test_marker)
    return True


def main(argv: list[str]) -> int:
    meipass = getattr(sys, "_MEIPASS", None)
    add_upgrade_test_migration(Path(meipass) if meipass else None)
    args = argv[1:]
    if len(args) >= 2 and args[0] == "-m" and args[1].startswith("inglenook."):
        sys.argv = [args[1], *args[2:]]
        runpy.run_module(args[1], run_name="__main__", alter_sys=True)
        return 0
    if all(arg.lower().endswith(".gguf") for arg in args):
        from inglenook.app.main import run_app

        return run_app(argv)
    from inglenook.cli import main as cli_main

    return cli_main(args)


if __name__ == "__main__":
    sys.exit(main(sys.argv))
