"""``python -m referee`` is the ``referee`` command."""

import sys

from referee.cli import main

if __name__ == "__main__":
    sys.exit(main())
