"""``python -m wss`` is the ``wss`` command."""

import sys

from wss.cli import main

if __name__ == "__main__":  # importing the module (tools, a worker process) does not run the command
    sys.exit(main())
