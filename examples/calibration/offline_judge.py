"""Try `referee calibrate` offline: Faithfulness judged by a scripted stand-in judge.

    referee calibrate examples/calibration/support_faithfulness.jsonl \\
        --evaluator examples/calibration/offline_judge.py:evaluator --folds 5

Importing this file starts referee's scripted judge server on 127.0.0.1. It answers
Faithfulness's questions with crude rules about whether the output's numbers and capitalised
names appear in the context. It is not a language model, and the agreement it
reaches says nothing about any real judge; it only makes the command, the stored run, the
reports and the calibration file visible without an API key. To calibrate a real judge, see
docs/calibration.md.
"""

from __future__ import annotations

import atexit
import re

from referee.evaluators import Faithfulness
from referee.testing import RecordedRequest, ScriptedJudgeServer

_BLOCK = re.compile(r"<<<BEGIN (?P<label>[A-Z ]+?) [0-9a-f]{12}>>>\n(?P<body>.*?)\n<<<END ", re.S)
_NUMBER = re.compile(r"\d+(?:[.,]\d+)?")
_NAME = re.compile(r"\b[A-Z][a-z]{3,}\b")


def _blocks(prompt: str) -> dict[str, str]:
    return {m.group("label"): m.group("body") for m in _BLOCK.finditer(prompt)}


def _unsupported_numbers(output: str, context: str) -> list[str]:
    numbers = set(_NUMBER.findall(context))
    return [n for n in _NUMBER.findall(output) if n not in numbers]


def _unsupported_names(output: str, context: str) -> list[str]:
    return [w for w in _NAME.findall(output) if w.lower() not in context.lower()]


def answer(request: RecordedRequest) -> str:
    """Each question looks at something else, so they disagree with people differently."""
    blocks = _blocks(request.prompt)
    output, context = blocks.get("MODEL OUTPUT", ""), blocks.get("CONTEXT", "")
    numbers, names = _unsupported_numbers(output, context), _unsupported_names(output, context)
    question = request.prompt.rsplit("Question:", 1)[-1].lower()
    if "contradict" in question:
        return "Yes" if numbers else "No"
    if "outside knowledge" in question:
        return "Yes" if names else "No"
    return "No" if numbers or names else "Yes"


server = ScriptedJudgeServer(reply=answer).start()
atexit.register(server.stop)
evaluator = Faithfulness(judge=server.judge_config(provider="openai", model="scripted-rule"))
