"""``python -m wss.cli`` is the ``wss`` command (as is ``python -m wss``)."""

import sys

from wss.cli import main

sys.exit(main())
