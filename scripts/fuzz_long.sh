#!/bin/sh
# A longer fuzzing run than `make test` does: the same hypothesis properties, more examples.
# Usage: scripts/fuzz_long.sh [EXAMPLES]   (default 5000 per property)
set -eu
cd "$(dirname "$0")/.."
INGLENOOK_FUZZ_EXAMPLES="${1:-5000}" QT_QPA_PLATFORM=offscreen \
    exec .venv/bin/python -m pytest tests/fuzz -q -p no:cacheprovider
