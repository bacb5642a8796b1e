"""`python -m compilewatch ...`, the same as the `compilewatch` console script."""
import sys

from compilewatch.cli import main

sys.exit(main())
