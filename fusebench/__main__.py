"""`python -m fusebench ...` runs the command line."""

from fusebench.cli import main

raise SystemExit(main())
