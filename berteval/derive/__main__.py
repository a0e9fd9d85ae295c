"""`python -m berteval.derive <base>+<variant> ...` (see `berteval.derive`)."""

import sys

from .cli import main

sys.exit(main())
