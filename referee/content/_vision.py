"""Which judge models can look at images and PDFs, so that a run is refused before its first
case, in one line, rather than paying for replies to prompts the model cannot see.

The table names the models each provider documents as text only (checked 2026-12-07); a model
it does not name is taken to have vision, which the provider's own reply then confirms or
refuses. A model served elsewhere (llama.cpp, vLLM) is declared with ``takes_images=``.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Collection, Iterable, Mapping
from typing import TYPE_CHECKING, Any

from referee.content._parts import ContentError, DocumentPart, ImagePart, TextPart

if TYPE_CHECKING:
    from referee.content._rules import ContentRules

OPENAI_TEXT_ONLY = (re.compile(r"^gpt-3\.5"), re.compile(r"^gpt-4(-\d{4}|-32k.*)?$"),
                    re.compile(r"^(o1|o3)-mini"), re.compile(r"^(text|davinci|babbage)-"),
                    re.compile(r"^gpt-oss"))
ANTHROPIC_TEXT_ONLY = (re.compile(r"^claude-(2|instant)"), re.compile(r"^claude-3-5-haiku"))
GEMINI_TEXT_ONLY = (re.compile(r"^gemini-1\.0-pro(?!-vision)"), re.compile(r"^gemma-(2|3-1b)"))
_VISION_HINT = "a judge model with vision, such as gpt-4.1, claude-sonnet-4-5 or gemini-2.5-flash"


def takes_images(rules: ContentRules, model: str, declared: bool | None = None) -> bool:
    if declared is not None:
        return declared
    name = model.lower().rsplit("/", 1)[-1]
    return not any(p.match(name) for p in rules.text_only)


def require_vision(rules: ContentRules, model: str,
                   parts: Iterable[TextPart | ImagePart | DocumentPart],
                   declared: bool | None = None) -> None:
    """Refuse, in one line, to send images or documents to a judge that cannot read them."""
    media = [part for part in parts if not isinstance(part, TextPart)]
    if media and not takes_images(rules, model, declared):
        kinds = " and ".join(sorted({f"{part.type}s" for part in media}))
        raise ContentError(f"judge {rules.provider}/{model} takes text only, and this "
                           f"criterion judges {kinds}", expected=_VISION_HINT)


def refuse_blind_judges(judges: Mapping[str, Any], cases: Iterable[Any],
                        rules_of: Callable[[str], ContentRules | None],
                        grading_media: Collection[str] = ()) -> None:
    """Before a run: refuse it, in one line, when a judged criterion's judge takes text only
    and a case holds an image or PDF (``judges``: the run description's judge per criterion
    label; ``rules_of``: a provider's content rules, None for one that has none), or when the
    criterion is one of ``grading_media`` (labels of criteria that grade images and PDFs
    whatever the case holds, such as the vision evaluators). Images an output will hold are
    refused when they reach such a judge."""
    blind = [(label, judge) for label, judge in _described_judges(judges)
             if (rules := rules_of(judge["provider"])) is None
             or not takes_images(rules, judge["model"])]
    if not blind:
        return
    for label, judge in blind:
        if label in grading_media:
            raise ContentError(f"criterion '{label}': judge {judge['provider']}/"
                               f"{judge['model']} takes text only, and the criterion grades "
                               "images and PDFs", expected=_VISION_HINT)
    from referee.content._load import find_parts

    for case in cases:
        media = find_parts(case)
        if media:
            label, judge = blind[0]
            kinds = " and ".join(sorted({f"{part.type}s" for part in media}))
            name = getattr(case, "display_name", None) or "a case"
            raise ContentError(f"criterion '{label}': judge {judge['provider']}/"
                               f"{judge['model']} takes text only, and case {name!r} holds "
                               f"{kinds}", expected=_VISION_HINT)


def _described_judges(judges: Mapping[str, Any]) -> Iterable[tuple[str, Mapping[str, Any]]]:
    for label, judge in judges.items():
        for found in _judge_dicts(judge):
            yield label, found


def _judge_dicts(value: Any) -> Iterable[Mapping[str, Any]]:
    """Each {provider, model} in a described judge (a panel lists its members)."""
    if isinstance(value, Mapping):
        if isinstance(value.get("provider"), str) and isinstance(value.get("model"), str):
            yield value
            return
        for item in value.values():
            yield from _judge_dicts(item)
    elif isinstance(value, (list, tuple)):
        for item in value:
            yield from _judge_dicts(item)
