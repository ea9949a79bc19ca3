"""``python -m wss`` is the ``wss`` command."""

import sys

from wss.cli import main

sys.exit(main())
