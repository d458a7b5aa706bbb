from inglenook.cli import main

raise SystemExit(main())
