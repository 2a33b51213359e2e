"""`python -m nodmix` runs the command line."""

from nodmix.cli import main

raise SystemExit(main())
