"""First-run timings of the installed bundle, as a new user meets it (prints JSON).

    python scripts/first_run_timing.py [--deb dist/inglenook_0.1.0_amd64.deb | --program PATH] [--runs 3]

Each run: a fresh HOME, a private Xvfb, no network (its own namespace with only loopback; needs
root), the installed program started as a user would. Measured from just before the process
starts (time.monotonic):
- ``window_s``: the first window (the welcome) is mapped (xdotool polls every 50 ms);
- ``window_painted_s``: it has drawn its text (xwd of the window polled; each probe ~0.2 s);
- ``question_sent_s``: the welcome dismissed and a short question typed and sent (the typing
  is the script's, ~20 ms a key);
- ``first_token_s``: question_sent_s + the answer's time to first token, as the engine
  recorded it in the store: from the send, so model load and queue wait are included.
A .deb is unpacked with dpkg-deb -x into a scratch folder; the machine's packages are left alone.
Numbers on a busy machine are noisy: run it a few times.
"""

from __future__ import annotations

import argparse
import json
import logging
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from tests.package.desktop_session import WELCOME_TITLE, launch, newest_deb, wait_answers, xvfb

log = logging.getLogger("first_run_timing")
QUESTION = "Hi! Who are you?"


def one_run(program: Path, work: Path) -> dict[str, float]:
    home = work / "home"
    home.mkdir()
    with xvfb() as display:
        app = launch(program, home, display)
        try:
            welcome = app.wait_window(WELCOME_TITLE, timeout=120)
            window_s = time.monotonic() - app.started
            probe = work / "probe.png"
            while True:  # mapped is not drawn: a new window is black until Qt first paints it
                app.screenshot(probe, welcome)
                if app.colours(probe) > 40 or time.monotonic() - app.started > 120:
                    break
            painted_s = time.monotonic() - app.started
            main = app.start_chatting(welcome)
            app.type_into(main, text=QUESTION, key="Return")
            question_sent_s = time.monotonic() - app.started
            answer = wait_answers(app, 1)[0]
            ttft_s = float(answer["ttft_ms"] or 0.0) / 1000
            app.quit()
        finally:
            if app.process.poll() is None:
                app.process.kill()
                app.process.wait(10)
    return {"window_s": round(window_s, 3), "window_painted_s": round(painted_s, 3),
            "question_sent_s": round(question_sent_s, 3),
            "ttft_after_send_s": round(ttft_s, 3), "first_token_s": round(question_sent_s + ttft_s, 3)}


def program_from(args: argparse.Namespace, scratch: Path) -> Path:
    if args.program:
        return Path(args.program)
    deb = Path(args.deb) if args.deb else newest_deb()
    if deb is None:
        raise SystemExit("no .deb in dist/: run `make package` first, or pass --program")
    subprocess.run(["dpkg-deb", "-x", str(deb), str(scratch)], check=True)
    return scratch / "opt" / "inglenook" / "inglenook"


def main() -> int:
    logging.basicConfig(level=logging.INFO, format="%(message)s")
    parser = argparse.ArgumentParser(description="First-run timings of the installed Inglenook bundle.")
    parser.add_argument("--deb", help="the .deb to unpack (default: the newest in dist/)")
    parser.add_argument("--program", help="an installed program to run instead (e.g. /opt/inglenook/inglenook)")
    parser.add_argument("--runs", type=int, default=1)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="inglenook-first-run-") as temporary:
        scratch = Path(temporary) / "root"
        program = program_from(args, scratch)
        runs = []
        for index in range(args.runs):
            work = Path(temporary) / f"run{index}"
            work.mkdir()
            runs.append(one_run(program, work))
            log.info("run %d: %s", index + 1, runs[-1])
    summary = {key: round(statistics.median(run[key] for run in runs), 3) for key in runs[0]}
    print(json.dumps({"program": str(args.program or args.deb or newest_deb()), "runs": runs,
                      "median": summary, "goal_first_token_s": 10.0}, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
