"""The old path of :mod:`referee.compat.multivon`: the very same module."""

import sys

from referee.compat import multivon
from referee.compat.multivon import MultivonSurface as MultivonSurface

sys.modules[__name__] = multivon
