"""``python -m mpilab.cli ARGS`` runs ``mpilab ARGS`` (where the console script is not on PATH)."""

import sys

from mpilab.cli import main

sys.exit(main())
