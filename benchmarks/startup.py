"""Start-up: from `inglenook run MODEL PROMPT` to the first byte of the answer, over the model's load.

Each run is a fresh process, as a person at a terminal starts it, against a profile made
once beforehand (the starter model already registered), answering a short prompt with
`--no-cache` so every run does the same work. Per run it measures:

- ``first_token_s``: process start (just before the child is spawned) to the first byte the
  child writes to stdout, which is the first byte of the answer;
- ``model_load_s``: the model's own load time, as the engine logs it (``loaded <id>: … in X s``:
  weights, context and chat template; 10 ms resolution);
- ``over_load_s``: their difference, everything start-up adds to loading the model (imports,
  opening the profile, reading the GGUF header, llama.cpp's start, the prompt's prefill);
  the quantity the start-up goal is about;
- ``cpu_s``: the CPU time the whole run used (user + system, every thread; with ``--threads 1``
  a figure that other work on the machine disturbs far less than the wall times above);

and, in separate processes, ``import_cli_s`` (`python -c "import inglenook.cli"`) and
``python_s`` (`python -c pass`, the interpreter's own start). Medians are printed as JSON.

With ``--baseline PATH`` (another checkout of the project, e.g. ``git worktree add
/tmp/startup-base <commit>``) the same runs are made with that checkout's code, interleaved
in rotating order so machine noise hits both alike, and the ratios are printed too.

    python benchmarks/startup.py [--runs 7] [--prompt hi] [--baseline /tmp/startup-base]
"""

from __future__ import annotations

import argparse
import json
import os
import re
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
STARTER = "smollm2-135m-instruct:q4_1"
# The engine's line when a model is ready (engine/runtime/model_loading.py); the last one in the log is this run's.
_LOADED = re.compile(r"loaded (\S+): .* in ([0-9.]+)s$")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=7, help="runs of each measurement (median reported)")
    parser.add_argument("--prompt", default="hi", help="the prompt (short: the goal is about start-up, not prefill)")
    parser.add_argument("--model", default=STARTER)
    parser.add_argument("--max-tokens", type=int, default=4)
    parser.add_argument("--baseline", type=Path, help="another checkout to measure beside this one")
    parser.add_argument(
        "--threads", type=int, default=0,
        help="inference threads saved in the profiles' settings (default 0: one per physical core). On a "
        "machine other work keeps busy, llama.cpp's threads wait on each other and the prompt's prefill "
        "swings by seconds; 1 keeps it steady",
    )
    args = parser.parse_args()
    checkouts = {"this": ROOT}
    if args.baseline is not None:
        checkouts["baseline"] = args.baseline.resolve()
    with tempfile.TemporaryDirectory(prefix="inglenook-startup-") as scratch:
        homes = {name: Path(scratch) / name for name in checkouts}
        for name, checkout in checkouts.items():
            _prepare(checkout, homes[name], args.model, args.threads)
        samples: dict[str, dict[str, list[float]]] = {name: {} for name in checkouts}
        kinds = [(name, kind) for name in checkouts for kind in ("run", "import", "python")]
        for round_index in range(args.runs):
            shift = round_index % len(kinds)
            for name, kind in kinds[shift:] + kinds[:shift]:
                measured = _measure(kind, checkouts[name], homes[name], args)
                for key, value in measured.items():
                    samples[name].setdefault(key, []).append(value)
            print(f"round {round_index + 1}/{args.runs} done", file=sys.stderr)
    report: dict[str, object] = {
        "model": args.model, "prompt": args.prompt, "runs": args.runs, "cpus": os.cpu_count(),
        "threads": args.threads or "auto", "load_average": [round(x, 2) for x in os.getloadavg()],
    }
    for name, values in samples.items():
        report[name] = {"checkout": str(checkouts[name]), **{k: round(statistics.median(v), 3) for k, v in values.items()}}
    if "baseline" in report:
        this, base = report["this"], report["baseline"]
        assert isinstance(this, dict) and isinstance(base, dict)
        report["ratio_this_to_baseline"] = {
            key: round(this[key] / base[key], 3) for key in this if key != "checkout" and base.get(key)
        }
    print(json.dumps(report, indent=2))


def _env(checkout: Path, home: Path) -> dict[str, str]:
    env = {**os.environ, "INGLENOOK_HOME": str(home), "HF_HUB_OFFLINE": "1", "PYTHONPATH": str(checkout),
           # Compiled bytecode, kept beside the profile, as an installed copy has it: a test
           # environment's PYTHONDONTWRITEBYTECODE would time compiling every module instead.
           "PYTHONPYCACHEPREFIX": str(home.parent / f"{home.name}-pycache")}
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    env.pop("PYTHONUNBUFFERED", None)  # the CLI flushes each chunk itself, as it does for a person
    return env


def _prepare(checkout: Path, home: Path, model: str, threads: int) -> None:
    """A profile with the model registered, the threads setting saved and a first run done."""
    # Through the checkout's own engine: its settings are its database's to write.
    setting = ("from inglenook.engine import Engine, Paths\n"
               f"with Engine(Paths.default(), scan=False) as engine:\n    engine.update_settings(threads={threads})\n")
    subprocess.run([sys.executable, "-c", setting], cwd=checkout, env=_env(checkout, home), check=True, timeout=600)
    result = subprocess.run(
        [sys.executable, "-m", "inglenook", "run", model, "hi", "--max-tokens", "1", "--no-cache"],
        cwd=checkout, env=_env(checkout, home), capture_output=True, text=True, timeout=600,
    )
    if result.returncode != 0:
        raise SystemExit(f"inglenook run failed in {checkout}:\n{result.stderr}")


def _measure(kind: str, checkout: Path, home: Path, args: argparse.Namespace) -> dict[str, float]:
    env = _env(checkout, home)
    if kind == "python":
        return {"python_s": _wall([sys.executable, "-c", "pass"], checkout, env)}
    if kind == "import":
        return {"import_cli_s": _wall([sys.executable, "-c", "import inglenook.cli"], checkout, env)}
    command = [sys.executable, "-m", "inglenook", "run", args.model, args.prompt,
               "--max-tokens", str(args.max_tokens), "--temperature", "0", "--no-cache"]
    before = _children_cpu()
    started = time.perf_counter()
    child = subprocess.Popen(command, cwd=checkout, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    assert child.stdout is not None
    first = os.read(child.stdout.fileno(), 1)  # blocks until the answer's first byte
    first_token = time.perf_counter() - started
    _, stderr = child.communicate(timeout=600)
    ended = time.perf_counter() - started
    cpu = _children_cpu() - before  # measurements run one at a time: the delta is this child's
    if child.returncode != 0 or not first:
        raise SystemExit(f"inglenook run failed ({child.returncode}): {stderr.decode(errors='replace')}")
    load = _last_load_seconds(home, args.model)
    return {"first_token_s": first_token, "model_load_s": load, "over_load_s": first_token - load, "exit_s": ended,
            "cpu_s": cpu}


def _children_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def _wall(command: list[str], checkout: Path, env: dict[str, str]) -> float:
    started = time.perf_counter()
    subprocess.run(command, cwd=checkout, env=env, check=True, timeout=600)
    return time.perf_counter() - started


def _last_load_seconds(home: Path, model: str) -> float:
    log_file = home / "logs" / "inglenook.log"
    found = [float(m.group(2)) for line in log_file.read_text(encoding="utf-8", errors="replace").splitlines()
             if (m := _LOADED.search(line)) and m.group(1) == model]
    if not found:
        raise SystemExit(f"no 'loaded {model}' line in {log_file}")
    return found[-1]


if __name__ == "__main__":
    main()
