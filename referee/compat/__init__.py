"""The edge: the peers' vocabularies, read and written here and nowhere in the core.

referee's core (the data model, record, store, run, judge and criteria) speaks referee's own
words; a peer's shape is translated at this edge on its way in or out (design decision 15):

- :mod:`referee.compat.adk`: Google ADK eval sets, read into the case model when a case file is
  loaded (referee.evalset) and written back (``EvalSet.save(path, format="adk")``).

No core module imports this package (tests/test_layers.py). The peers' public names that users
import (``from referee import ...``) keep working: docs/compat.md lists them.
"""
