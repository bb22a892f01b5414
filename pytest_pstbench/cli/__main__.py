"""`python -m pytest_pstbench.cli ...` runs the `pstbench` command."""

import sys

from pytest_pstbench.cli import main

sys.exit(main())
