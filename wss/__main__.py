"""``python -m wss`` is the ``wss`` command."""

import sys

from wss.cli import main

if __name__ == "__main__":  # a sweep's worker processes re-import this module: they must not run the command
    sys.exit(main())
