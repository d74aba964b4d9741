"""``python -m gpuplace`` runs the command line (as on a GPU box: PYTHONPATH=src python3 -m gpuplace)."""

import sys

from gpuplace.cli import main

sys.exit(main())
