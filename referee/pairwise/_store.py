"""Where a pairwise comparison of two stored runs is kept: beside the later run (B), in
``B/comparisons/pairwise-<key>.jsonl``, written pair by pair as each is judged.

The key covers what shapes a verdict: the two runs' ids, the criterion, the judge (for a judge
panel its members, aggregate, weights and quorum) and whether both orders are asked. The first line describes the comparison; each later line is one pair
(secrets removed), with hashes of the two outputs it judged. Running the same comparison again
(``referee compare --judge``, the viewer's compare page, ``compare_models``) reopens the file
and takes every pair the judge already decided over the same two outputs from it, so an
interrupted comparison resumes without asking the judge again; a JUDGE_ERROR is asked again.
A line cut short by an interruption is skipped.
"""

from __future__ import annotations

import hashlib
import json
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from referee.errors import InputError
from referee.judge import JudgeConfig
from referee.judge.panel import PANEL, JudgePanel, panel_model_name
from referee.pairwise._judging import (
    MemberPairVerdict,
    OrderedVerdict,
    PairCriterion,
    PairVerdict,
)
from referee.redact import redact_secrets
from referee.usage import TokenUsage

COMPARISONS_DIR = "comparisons"
FORMAT = "referee.pairwise/1"
_DECIDED = ("a", "b", "tie")


# An output as a stored verdict was judged over: its text, and its images' content hashes.
Judged = tuple[str | None, tuple[str, ...]]


def output_hash(output: Judged) -> str | None:
    """The hash of an output's text, and of its images' content hashes when it holds any (an
    output without images hashes as its text alone, as comparisons stored before images)."""
    text, media = output
    if text is None:
        return None
    shown = text if not media else "\n".join([text, "\0media", *media])
    return hashlib.sha256(shown.encode("utf-8", "replace")).hexdigest()


def _judge_shape(judge: JudgeConfig) -> dict[str, Any]:
    return {"provider": judge.provider, "model": judge.model, "base_url": judge.base_url}


def comparison_key(run_a: str, run_b: str, criterion: PairCriterion,
                   judge: JudgeConfig | JudgePanel, both_orders: bool) -> str:
    if isinstance(judge, JudgePanel):
        judged_by: dict[str, Any] = {"panel": [_judge_shape(m) for m in judge.members],
                                     "aggregate": judge.aggregate, "weights": judge.weights,
                                     "quorum": judge.effective_quorum}
    else:
        judged_by = _judge_shape(judge)
    shape = json.dumps({"a": run_a, "b": run_b, **criterion.to_dict(), **judged_by,
                        "both_orders": both_orders}, sort_keys=True)
    return hashlib.sha256(shape.encode("utf-8")).hexdigest()[:16]


def judge_header(judge: JudgeConfig | JudgePanel) -> dict[str, Any]:
    """What the stored comparison's first line says of its judge (enough to show it again)."""
    if not isinstance(judge, JudgePanel):
        return {"judge_provider": judge.provider, "judge_model": judge.model}
    return {"judge_provider": PANEL, "judge_model": panel_model_name(judge.members),
            "panel": {"members": [{"provider": m.provider, "model": m.model}
                                  for m in judge.members],
                      "aggregate": judge.aggregate, "weights": judge.weights,
                      "quorum": judge.quorum}}


def judge_from_header(header: dict[str, Any], source: str) -> JudgeConfig | JudgePanel:
    """The judge ``judge_header`` described; a panel is rebuilt with its rules."""
    panel = header.get("panel")
    try:
        if header.get("judge_provider") == PANEL or panel is not None:
            if not isinstance(panel, dict):
                raise InputError("a panel comparison without its panel", source=source,
                                 field="panel", expected="the panel's members and rules")
            return JudgePanel.model_validate(panel)
        return JudgeConfig(provider=header.get("judge_provider") or "anthropic",
                           model=header.get("judge_model") or "")
    except ValidationError as exc:
        first = exc.errors()[0]
        raise InputError(str(first["msg"]), source=source,
                         field=".".join(str(part) for part in first["loc"]) or "judge",
                         expected="the judge as referee stored it") from None


def ordered_verdict_from(data: dict[str, Any]) -> OrderedVerdict:
    return OrderedVerdict(first=data["shown_first"], preferred=data["preferred"],
                          reason=data.get("reason") or "", raw_reply=data.get("raw_reply") or "",
                          cached=bool(data.get("cached")), question=data.get("question"),
                          judge=data.get("judge"))


def member_verdict_from(data: dict[str, Any]) -> MemberPairVerdict:
    return MemberPairVerdict(
        judge=data["judge"], provider=data.get("provider") or "", model=data.get("model") or "",
        weight=float(data.get("weight", 1.0)), preferred=data.get("preferred"),
        position_consistent=data.get("position_consistent"), reason=data.get("reason") or "",
        token_usage=TokenUsage.model_validate(data.get("token_usage") or {}),
        error=data.get("error"))


def pair_verdict_from(data: dict[str, Any]) -> PairVerdict:
    """A pair's verdict as ``PairVerdict.to_dict()`` stored it, a panel's member verdicts too."""
    return PairVerdict(
        preferred=data["preferred"], position_consistent=data.get("position_consistent"),
        reason=data.get("reason") or "",
        orders=tuple(ordered_verdict_from(o) for o in data.get("orders") or ()),
        token_usage=TokenUsage.model_validate(data.get("token_usage") or {}),
        judge_provider=data.get("judge_provider") or "", judge_model=data.get("judge_model") or "",
        members=tuple(member_verdict_from(m) for m in data.get("judges") or ()))


@dataclass(frozen=True)
class StoredPair:
    """One pair as stored: its outcome (as ``PairOutcome.to_dict()`` wrote it) and the hashes of
    the outputs it judged."""

    data: dict[str, Any]

    @property
    def key(self) -> str:
        return str(self.data.get("pair_key") or self.data.get("eval_id"))

    def decided_over(self, output_a: Judged, output_b: Judged) -> bool:
        return (self.data.get("status") in _DECIDED and self.data.get("verdict") is not None
                and self.data.get("hash_a") == output_hash(output_a)
                and self.data.get("hash_b") == output_hash(output_b))


class ComparisonFile:
    """One stored comparison: its header and its pairs, the latest line per pair in force."""

    def __init__(self, path: Path, header: dict[str, Any], pairs: dict[str, StoredPair]) -> None:
        self.path = path
        self.header = header
        self.pairs = pairs

    @classmethod
    def read(cls, path: str | Path) -> ComparisonFile:
        path = Path(path)
        try:
            # Only "\n" ends a line: an output may hold U+2028 and the like, kept as they are.
            lines = path.read_text(encoding="utf-8").removesuffix("\n").split("\n")
        except (OSError, UnicodeDecodeError) as exc:
            raise InputError(f"cannot read the stored comparison: {exc}", source=str(path)) from exc
        header: dict[str, Any] | None = None
        pairs: dict[str, StoredPair] = {}
        for number, line in enumerate(lines, 1):
            try:
                data = json.loads(line)
            except json.JSONDecodeError:
                if number == len(lines):
                    break  # the last line, cut short by an interruption
                raise InputError("not a JSON line", source=str(path), line=number,
                                 expected="one JSON object per line") from None
            if not isinstance(data, dict):
                raise InputError("not a JSON object", source=str(path), line=number,
                                 expected="one JSON object per line")
            if data.get("format") == FORMAT:
                header = data  # a comparison run again restates it; the latest is in force
            elif header is None:
                raise InputError("not a stored pairwise comparison", source=str(path),
                                 line=number, expected=f'a first line with "format": "{FORMAT}"')
            else:
                pair = StoredPair(data)
                pairs[pair.key] = pair
        if header is None:
            raise InputError("empty stored comparison", source=str(path),
                             expected=f'a first line with "format": "{FORMAT}"')
        judge_from_header(header, str(path))  # a damaged judge is found here, not when shown
        return cls(path, header, pairs)

    @classmethod
    def open(cls, home: str | Path, header: dict[str, Any]) -> ComparisonFile:
        """The comparison ``header`` describes under ``home`` (B's run directory): reopened when
        it was stored before, created otherwise."""
        directory = Path(home) / COMPARISONS_DIR
        path = directory / f"pairwise-{header['key']}.jsonl"
        if path.is_file():
            stored = cls.read(path)
            stored.header = {**stored.header, **header, "created_at": stored.header.get(
                "created_at", header["created_at"])}
            stored._append({**stored.header, "format": FORMAT})
            return stored
        directory.mkdir(parents=True, exist_ok=True)
        stored = cls(path, header, {})
        stored._append({**header, "format": FORMAT})
        return stored

    def _append(self, data: dict[str, Any]) -> None:
        line = json.dumps(redact_secrets(data), ensure_ascii=False, default=str) + "\n"
        with self.path.open("a", encoding="utf-8") as handle:
            handle.write(line)  # flushed on close: a killed process keeps every finished pair

    def record(self, data: dict[str, Any], *, position: int, output_a: Judged,
               output_b: Judged) -> None:
        """Store one judged pair (``PairOutcome.to_dict()``; ``position``: its case's place in
        the runs, as pairs are stored in the order they finish) at once."""
        pair = StoredPair({**data, "position": position, "hash_a": output_hash(output_a),
                           "hash_b": output_hash(output_b), "stored_at": time.time()})
        self._append(pair.data)
        self.pairs[pair.key] = pair

    def in_case_order(self) -> list[StoredPair]:
        return sorted(self.pairs.values(), key=lambda p: p.data.get("position", 0))

    def reusable(self, key: str, output_a: Judged, output_b: Judged) -> StoredPair | None:
        pair = self.pairs.get(key)
        return pair if pair is not None and pair.decided_over(output_a, output_b) else None


def stored_comparisons(run_b_dir: str | Path, run_a_id: str | None = None) -> list[ComparisonFile]:
    """The comparisons kept beside run B (those against run ``run_a_id`` when given), the
    latest first; a damaged file is left out (with its error on ``damaged``)."""
    directory = Path(run_b_dir) / COMPARISONS_DIR
    if not directory.is_dir():
        return []
    found = []
    for path in directory.glob("pairwise-*.jsonl"):
        try:
            stored = ComparisonFile.read(path)
        except InputError:
            continue
        if run_a_id is None or stored.header.get("run_a") == run_a_id:
            found.append((path.stat().st_mtime, stored))
    return [stored for _, stored in sorted(found, key=lambda item: item[0], reverse=True)]
