"""The packaged program's entry point: one executable for the window and the command line.

- no arguments, or only ``.gguf`` files (a double-click, "Open with"): the desktop app;
- ``-m MODULE ARGS…``: run an Inglenook module as ``python -m`` would. The quantization lab
  starts its quantizer as ``sys.executable -m inglenook.engine.lab.quantize``; in a bundle
  ``sys.executable`` is this program, so it has to understand that form;
- anything else: the ``inglenook`` command line (``inglenook doctor``, ``inglenook serve``…).
"""

from __future__ import annotations

import runpy
import sys


def main(argv: list[str]) -> int:
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
