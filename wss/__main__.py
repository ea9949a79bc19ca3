"""``python -m wss`` is the ``wss`` command."""

import sys

from .cli import main

sys.exit(main())
