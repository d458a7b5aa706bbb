"""`python -m inglenook.cli`: the same command line as `inglenook` (tests and scripts run it so)."""

from inglenook.cli import main

raise SystemExit(main())
