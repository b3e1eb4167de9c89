"""`python -m mcpfusion ...`: the same as the `mcpfusion` command."""

import sys

from .cli import main

sys.exit(main())
