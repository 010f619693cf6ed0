"""The old path of :mod:`referee.compat.adk`: the very same module, so that imports and patches
through ``referee._adk`` keep working."""

import sys

from referee.compat import adk

sys.modules[__name__] = adk
