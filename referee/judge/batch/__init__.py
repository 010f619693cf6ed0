"""Judge requests through the providers' batch APIs, at their batch price (``batch_api``).

``call_by_batch`` is the judge layer's one entry (Judge.complete's batch seam); the batches
are durable through ``batch_journal(run_dir)``, which the run session opens around a stored run.
Per provider: OpenAI's Batch API (_openai), Anthropic's Message Batches (_anthropic),
Gemini's batch mode (_google).
"""

from referee.judge.batch._api import BatchState, EnqueuedLimitReached, ItemOutcome
from referee.judge.batch._journal import (
    JOURNAL_FILE,
    BatchJournal,
    batch_journal,
    batch_progress,
    current_journal,
)
from referee.judge.batch._transport import (
    BatchDispatcher,
    BatchRequestFailed,
    BatchSettings,
    call_by_batch,
    loop_dispatchers,
    request_id,
    supports_batch,
)

__all__ = [
    "JOURNAL_FILE",
    "BatchDispatcher",
    "BatchJournal",
    "BatchRequestFailed",
    "BatchSettings",
    "BatchState",
    "EnqueuedLimitReached",
    "ItemOutcome",
    "batch_journal",
    "batch_progress",
    "call_by_batch",
    "current_journal",
    "loop_dispatchers",
    "request_id",
    "supports_batch",
]
