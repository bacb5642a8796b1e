"""`python -m collectors collect|bench ...`, the same commands as `compilewatch collect|bench`."""
import sys

from .cli import main

sys.exit(main())
