"""``python -m ampc.lab``: see ``ampc.lab.cli`` and ``--help``."""
import sys

from .cli import main

if __name__ == "__main__":
    sys.exit(main())
