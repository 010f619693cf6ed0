"""Reading judge replies: yes/no verdicts (multivon, "UNKNOWN verdicts") and JSON objects."""

from __future__ import annotations

import functools
import json
import math
import re
from collections.abc import Iterable
from enum import Enum
from typing import Any

from referee.redact import clip

# How much of a judge reply a result's details keep as evidence (after redaction).
REPLY_EVIDENCE_CHARS = 1000


def reply_evidence(text: str) -> str:
    """A judge reply as a result keeps it, so that a stored run can be audited: secrets
    removed, at most ``REPLY_EVIDENCE_CHARS`` characters, line breaks kept."""
    return clip(text, REPLY_EVIDENCE_CHARS, one_line=False)


class Verdict(str, Enum):
    YES = "yes"
    NO = "no"
    UNKNOWN = "unknown"


_FENCE = re.compile(r"```[a-zA-Z0-9_-]*\s*(.*?)```", re.DOTALL)
# XML/HTML-style tags ("<answer>No</answer>", "<b>Yes</b>"). They become spaces: stripping only
# their '>' as markup would glue the tag name onto the verdict word ("<answerNo").
# "<Yes>" itself is a verdict in angle brackets, not a tag.
_TAG = re.compile(r"</?(?!(?:yes|no)>)[A-Za-z][A-Za-z0-9_:.-]*(?:\s[^<>]*)?/?>", re.IGNORECASE)
# Letters only on the ASCII side: CJK text glued to "Yes" must not hide the word.
_WORD = re.compile(r"(?<![A-Za-z])(yes|no)(?![A-Za-z'’-])", re.IGNORECASE)
# Away from the start of the reply a verdict word must end its clause: a word after it on the
# same line makes it part of a phrase ("no invented details", "there are no unsupported
# claims", "say yes to"), not an answer; a reason may follow ("yes because ...").
_STANDING_WORD = re.compile(
    r"(?<![A-Za-z])(yes|no)(?![A-Za-z'’-])"
    r"(?![ \t]*(?!(?:because|since|as|given)(?![A-Za-z]))[A-Za-z])",
    re.IGNORECASE)
# "not yes", "never no", "isn't yes": a negated verdict word answers nothing.
_NEGATED = re.compile(r"(?:\b(?:not|never)|n['’]t)\s*[\"'“‘]?\s*$", re.IGNORECASE)
# referee's own data blocks (referee.evaluators.prompts), "<<<BEGIN NAME TAG>>>" to
# "<<<END NAME TAG>>>". A judge that echoes one quotes the material under test: a "Yes" in it
# is the model's text, never the judge's verdict. An unclosed block runs to the end of the
# reply; an END marker without its BEGIN closes an echo that started with the reply. A marker
# is the rest of its line, however its closing ">>>" was mangled (small models write ">>").
_ECHOED_BLOCK = re.compile(r"<<<\s*BEGIN\b[^\n]*.*?(?:<<<\s*END\b[^\n]*|\Z)",
                           re.IGNORECASE | re.DOTALL)
_ORPHAN_END = re.compile(r"\A.*<<<\s*END\b[^\n]*", re.IGNORECASE | re.DOTALL)
_MARKUP = re.compile(r"[*_`#>~]+")
_LABEL = re.compile(
    r"^\s*(?:final\s+answer|answer|verdict|result|response|decision|judgement|judgment|a)"
    r"\s*[:：=\-]\s*",
    re.IGNORECASE,
)
_LEADING_NOISE = re.compile(r"^[\s\"'“”‘’«»\[\](){}.,:;!?¿¡\-–—•·|]+")
# Both verdict words joined: "yes and no", "yes or no", "yes/no", "no-or-yes".
_BOTH = re.compile(r"^(yes|no)\s*(?:and|or|/|\\|&)\s*(yes|no)(?![A-Za-z])", re.IGNORECASE)
# A lone verdict word under one of these is not a verdict ("I can't say yes", "not sure").
_HEDGE = re.compile(
    r"\b(?:cannot|can't|can’t|can\s+not|could\s+not|couldn't|unable\s+to|impossible\s+to|"
    r"not\s+(?:sure|certain|possible|clear)|uncertain|unclear|undetermined|"
    r"insufficient|it\s+depends|hard\s+to\s+(?:say|tell)|difficult\s+to\s+(?:say|tell)|"
    r"neither|maybe|perhaps|partially|partly|probably|possibly|likely|arguably|mostly|"
    r"somewhat)\b",
    re.IGNORECASE,
)
_JSON_KEYS = ("answer", "verdict", "result", "response", "decision", "label", "judgment",
              "judgement")
# A reply that wraps its verdict in one of these elements is answered by that element alone,
# whatever reasoning surrounds it ("<thinking>yes, but...</thinking><answer>No</answer>").
# Not <response>/<result>: a judge may quote the material under those names.
_ANSWER_ELEMENT = re.compile(
    r"<(answer|verdict|decision|judgment|judgement)(?:\s[^<>]*)?>(.*?)</\1\s*>",
    re.IGNORECASE | re.DOTALL)


def _from_json(text: str) -> Verdict | None:
    try:
        obj = parse_json_object(text, _JSON_KEYS)
    except ValueError:
        return None
    lowered = {str(k).lower(): v for k, v in obj.items()}
    for key in _JSON_KEYS:
        if key not in lowered:
            continue
        value = lowered[key]
        if isinstance(value, bool):
            return Verdict.YES if value else Verdict.NO
        if isinstance(value, str):
            return _from_text(value)
        if isinstance(value, dict):  # {"result": {"answer": "yes"}}
            return _from_json(json.dumps(value)) or Verdict.UNKNOWN
        return Verdict.UNKNOWN
    return None


def _clean(text: str) -> str:
    text = _TAG.sub(" ", text)
    text = _MARKUP.sub("", text)
    previous = None
    while previous != text:
        previous = text
        text = _LEADING_NOISE.sub("", text)
        text = _LABEL.sub("", text)
    return text.strip()


def without_echoed_blocks(text: str) -> str:
    """``text`` less every data block of referee's prompts that the judge echoed back."""
    if "<<<" not in text:
        return text
    text = _ECHOED_BLOCK.sub(" ", text)
    return _ORPHAN_END.sub(" ", text)


def _from_text(text: str, start_decides: bool = True) -> Verdict:
    cleaned = _clean(text)
    if not cleaned:
        return Verdict.UNKNOWN
    if _BOTH.match(cleaned):
        return Verdict.UNKNOWN
    first = _WORD.match(cleaned)
    if first and start_decides:
        return Verdict(first.group(1).lower())
    found = list(_STANDING_WORD.finditer(cleaned))
    # A judge that repeats its answer ("Answer: Yes. ... Answer: Yes.") gave one verdict.
    if (found and len({m.group(1).lower() for m in found}) == 1
            and not _HEDGE.search(cleaned)
            and not any(_NEGATED.search(cleaned, 0, m.start()) for m in found)):
        return Verdict(found[0].group(1).lower())
    return Verdict.UNKNOWN


def parse_verdict(text: str | None, *, echoes: tuple[str, ...] = ()) -> Verdict:
    """YES or NO when the reply starts with one or its standing verdict words all agree.

    Everything else (hedges, both words, no word at all, "Yesterday ...", a "no" that is part
    of a phrase such as "no invented details", a word inside an echoed data block) is UNKNOWN.
    The grammar is in docs/judge.md ("The verdict grammar"). ``echoes``: prompt text the judge
    may have repeated (its task, its question), read as not part of the answer.
    """
    if text is not None and len(text) <= _REMEMBERED_REPLY_CHARS:
        return _parse_short(text, echoes)
    return _parse(text, echoes)


# Judges mostly answer in a few words, the same few words thousands of times a run, and each
# reply is read twice (is it a verdict? which?): short replies are parsed once.
_REMEMBERED_REPLY_CHARS = 200


@functools.lru_cache(maxsize=4096)
def _parse_short(text: str, echoes: tuple[str, ...]) -> Verdict:
    return _parse(text, echoes)


def _parse(text: str | None, echoes: tuple[str, ...] = ()) -> Verdict:
    if not text or not text.strip():
        return Verdict.UNKNOWN
    unechoed = without_echoed_blocks(text)
    for echo in echoes:
        unechoed = unechoed.replace(echo, " ")
    # After an echo, what is left did not start the reply: the start rule, which reads the
    # judge's first word, does not apply, and the verdict words left must all agree.
    start_decides = unechoed == text
    stripped = unechoed.strip()
    if not stripped:
        return Verdict.UNKNOWN
    if "{" in stripped:
        from_json = _from_json(stripped)
        if from_json is not None:
            return from_json
    fence = _FENCE.search(stripped)
    if fence and not _clean(_FENCE.sub("", stripped)):
        stripped = fence.group(1)
    elements = _ANSWER_ELEMENT.findall(stripped)
    if elements:
        verdicts = {_from_text(inner) for _, inner in elements}
        return verdicts.pop() if len(verdicts) == 1 else Verdict.UNKNOWN
    return _from_text(stripped, start_decides)


def score_problem(value: Any) -> str | None:
    """Why ``value``, a judge reply's ``score`` field, is no usable score; None when it is one.

    A usable score is a number from 0.0 to 1.0 (or a string holding one): not a boolean, not
    NaN, never clamped into range. ``value`` is None when the field is missing.
    """
    if value is None:
        return "the reply has no top-level 'score'"
    number = value
    if isinstance(value, str):
        try:
            number = float(value.strip())
        except ValueError:
            number = None
    if isinstance(number, bool) or not isinstance(number, (int, float)):
        return f"'score' is not a number: {json.dumps(value, default=str)[:80]}"
    if math.isnan(number) or not 0.0 <= number <= 1.0:
        return f"'score' {json.dumps(value, default=str)[:40]} is outside 0.0-1.0"
    return None


def read_score(value: Any) -> float | None:
    """``value`` as a score from 0.0 to 1.0, or None when it is no usable score
    (``score_problem`` says why)."""
    return None if score_problem(value) is not None else float(value)


def reply_reason(data: dict[str, Any]) -> str:
    """The reason a JSON judge reply gives (``reason``, else ``reasoning``), as text."""
    reason = data.get("reason", data.get("reasoning", ""))
    return reason if isinstance(reason, str) else str(reason)


def parse_json_object(text: str | None, expected_keys: Iterable[str] = ()) -> dict[str, Any]:
    """The judge's JSON object in a reply, tolerating code fences and prose around it.

    A judge that quotes the output it judges may echo a JSON object from it before giving its
    own, so an echoed object must not become the verdict: a reply that is one object is that
    object; otherwise, of the complete top-level objects in the reply, the last one that holds
    one of ``expected_keys`` (case-insensitive) wins, else the last one. ValueError when there
    is none.
    """
    if text is None or not text.strip():
        raise ValueError("judge reply is empty; expected a JSON object")
    stripped = text.strip()
    try:
        whole = json.loads(stripped)
    except ValueError:
        whole = None
    if isinstance(whole, str) and whole.strip().startswith("{"):
        # The object sent as a JSON string ("{\"score\": 0.8}"): the object is the reply.
        try:
            whole = json.loads(whole)
        except ValueError:
            pass
    if isinstance(whole, dict):
        return whole
    decoder = json.JSONDecoder()
    found: list[dict[str, Any]] = []
    position = stripped.find("{")
    while position != -1:
        try:
            value, end = decoder.raw_decode(stripped, position)
        except ValueError:
            position = stripped.find("{", position + 1)
            continue
        if isinstance(value, dict):
            found.append(value)
        # Skip past the object: its nested objects are part of it, not candidates.
        position = stripped.find("{", end)
    if found:
        wanted = {key.lower() for key in expected_keys}
        keyed = [obj for obj in found if wanted & {str(k).lower() for k in obj}]
        return (keyed or found)[-1]
    preview = stripped.replace("\n", " ")
    if len(preview) > 80:
        preview = preview[:77] + "..."
    raise ValueError(f"judge reply holds no JSON object: {preview!r}")
