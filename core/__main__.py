"""`python -m core ...`: the headless entry point (see core/cli/)."""

import sys

from core.cli import main

sys.exit(main())
