"""Where a stored run's judge batches stand at the provider, asked without resuming the run
(``referee resume RUN_DIR`` without --wait, the viewer)."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from referee.judge.batch._api import BatchState
from referee.judge.batch._journal import JOURNAL_FILE, BatchJournal, SubmittedBatch, _age


@dataclass(frozen=True)
class BatchStatus:
    """A journalled batch, and its state at the provider (None: it could not be asked)."""

    batch: SubmittedBatch
    state: BatchState | None = None
    unknown_because: str | None = None

    @property
    def pending(self) -> bool:
        return self.state is not None and not self.state.ended

    def describe(self, now: float | None = None) -> str:
        """One line: provider, id, state, counts and age."""
        batch = self.batch
        age = (f", submitted {_age((now or time.time()) - batch.submitted_at)} ago"
               if batch.submitted_at else "")
        if self.state is None:
            where = f"state unknown ({self.unknown_because})"
        else:
            state = self.state
            total = state.total or batch.requests
            where = (f"{state.status}: {state.completed} of {total} completed, "
                     f"{state.failed} failed")
        return f"{batch.provider} {batch.batch_id} ({batch.requests} request(s)): {where}{age}"


def journalled_batches(run_dir: str | Path) -> list[SubmittedBatch]:
    """The batches a run's journal records as submitted (none without a journal)."""
    if not (Path(run_dir) / JOURNAL_FILE).is_file():
        return []
    return BatchJournal(run_dir).batches


def batch_statuses(batches: Sequence[SubmittedBatch],
                   judges: Mapping[str, Mapping[str, Any]]) -> list[BatchStatus]:
    """Ask the provider about each batch, through the judge stored for its provider
    (``judges``: provider -> the run's stored judge settings; the key comes from the
    environment, as for any judge)."""
    from referee.judge.client import close_loop_clients

    async def ask_all() -> list[BatchStatus]:
        try:
            return [await _ask(batch, judges.get(batch.provider)) for batch in batches]
        finally:
            await close_loop_clients()

    return asyncio.run(ask_all())


async def _ask(batch: SubmittedBatch, judge: Mapping[str, Any] | None) -> BatchStatus:
    from referee.judge.batch._transport import _APIS
    from referee.judge.client import _endpoint_for
    from referee.judge.config import JudgeConfig
    from referee.redact import clip

    api = _APIS.get(batch.provider)
    if api is None or judge is None:
        return BatchStatus(batch, unknown_because=f"no stored {batch.provider} judge")
    try:
        settings = {k: judge[k] for k in ("model", "base_url", "api_style") if judge.get(k)}
        cfg = JudgeConfig(provider=batch.provider, cache=False, **settings)
        client = _endpoint_for(cfg).client(cfg)
        return BatchStatus(batch, await api.retrieve(client, batch.batch_id))
    except Exception as exc:  # no key here, the network, a batch the provider forgot
        return BatchStatus(batch, unknown_because=clip(f"{type(exc).__name__}: {exc}", 160))


def stored_judges(meta: Mapping[str, Any]) -> dict[str, dict[str, Any]]:
    """Provider -> the settings of a judge a stored run's meta.json names for it (the run's
    own judge first, then those inside its criteria), for asking about its batches."""
    found: dict[str, dict[str, Any]] = {}

    def visit(value: Any) -> None:
        if isinstance(value, Mapping):
            provider = value.get("provider")
            if isinstance(provider, str) and isinstance(value.get("model"), str):
                known = found.get(provider)
                if known is None or (value.get("base_url") and not known.get("base_url")):
                    found[provider] = dict(value)
            for item in value.values():
                visit(item)
        elif isinstance(value, list):
            for item in value:
                visit(item)

    visit(meta.get("judge"))
    visit(meta.get("criteria"))
    return found
