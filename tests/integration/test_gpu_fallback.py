"""A GPU backend module whose driver is missing: the engine runs on the CPU and says why.

Without a GPU here, the module is a real shared library built for the test that needs a
driver library that is not on this machine (as libggml-cuda.so needs libcuda.so.1 on a
computer without NVIDIA's driver); it sits beside the real CPU variants in a copy of
llama-cpp-python's library folder.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from inglenook.engine.runtime.native import backend_report

CHILD = """
import json, logging, sys
from pathlib import Path
logging.basicConfig(level=logging.WARNING, format="%(levelname)s %(message)s")
from inglenook.engine.runtime.backends import load_backends
report = load_backends(Path(sys.argv[1]))
print(json.dumps({"cpu": report.cpu_variant, "backends": report.backends, "not_loaded": report.not_loaded}))
"""


def build_module_needing_a_missing_driver(folder: Path) -> Path:
    compiler = shutil.which("cc") or shutil.which("gcc")
    if compiler is None:
        pytest.fail("a C compiler is needed (the README's setup needs one too)")
    stub_dir = folder / "stub"
    stub_dir.mkdir()
    (stub_dir / "driver.c").write_text("int fake_driver_init(void) { return 0; }\n")
    subprocess.run([compiler, "-shared", "-fPIC", "-o", str(stub_dir / "libinglenook-fake-driver.so"),
                    str(stub_dir / "driver.c")], check=True)
    (folder / "module.c").write_text("int fake_driver_init(void);\nint ggml_backend_init(void) { return fake_driver_init(); }\n")
    module = folder / "libggml-cuda.so"
    subprocess.run([compiler, "-shared", "-fPIC", "-o", str(module), str(folder / "module.c"),
                    f"-L{stub_dir}", "-linglenook-fake-driver"], check=True)
    shutil.rmtree(stub_dir)  # the "driver" is gone, as on a machine without it
    return module


def test_a_gpu_module_that_cannot_load_leaves_the_engine_on_the_cpu(tmp_path: Path) -> None:
    libs = tmp_path / "lib"
    shutil.copytree(backend_report().library_dir, libs, symlinks=True)
    build_module_needing_a_missing_driver(libs)
    result = subprocess.run([sys.executable, "-c", CHILD, str(libs)], capture_output=True, text=True,
                            env={**os.environ, "LLAMA_CPP_LIB_PATH": str(libs)}, timeout=120)
    assert result.returncode == 0, result.stderr
    report = json.loads(result.stdout.strip().splitlines()[-1])
    assert report["backends"] == ["CPU"] and report["cpu"] == backend_report().cpu_variant
    reason = report["not_loaded"]["libggml-cuda.so"]
    assert "libinglenook-fake-driver.so" in reason  # the loader's own words: which library is missing
    # One warning line names the module and says the engine runs on the CPU.
    warnings = [line for line in result.stderr.splitlines() if "libggml-cuda.so" in line]
    assert len(warnings) == 1 and "running on the CPU" in warnings[0], result.stderr
