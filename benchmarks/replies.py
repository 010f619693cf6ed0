"""What the scripted judge answers, for each system's own prompt shapes.

Every system must get a valid reply to its own prompts, or the benchmark would measure error
handling instead of evaluation. The reply is chosen from the OpenAI chat-completions request:

- deepeval asks for structured output (``response_format`` with a JSON schema); the schema's
  name says what it wants (claims, truths, statements, verdicts, a reason, a score).
- referee's batched mode asks for ``{"answers": {"n": "yes"|"no", ...}}``.
- multivon-eval's Faithfulness asks for a bare JSON array of claims.
- every per-question QAG prompt (referee, multivon-eval) gets a one-word Yes or No.

Verdicts are chosen so that the benchmark answers are the "good" answers: a question that asks
about a defect (contradiction, invented facts, off-topic content) gets "No", any other "Yes".
So every system scores every W1 case as passing, and the systems' verdicts can be compared.
Standard library only.
"""

from __future__ import annotations

import json
import re
from typing import Any

from referee.judge.providers import SCHEMA_NAME

CLAIMS = [
    "The item can be returned within the stated number of days.",
    "Opened items are charged a restocking fee.",
    "The return window starts at delivery.",
]

# A question about a defect is answered "No" by a good response; "without ..." and "free of ..."
# phrase the same defect as a virtue, so they are answered "Yes".
_DEFECT = re.compile(
    r"contradict|introduce|content unrelated|fabricat|invent|hallucinat|not supported|"
    r"unsupported|off[- ]topic|harmful|toxic|offensive|biased|outside knowledge|assumptions|"
    r"misstate|distort|misrepresent|boilerplate|evasion|filler|abrupt|leave out|omit",
    re.IGNORECASE,
)
_VIRTUE = re.compile(r"\b(without|free of|free from|avoid)\b", re.IGNORECASE)


def good_answer(question: str) -> bool:
    """True when "Yes" is the answer a well-behaved response earns for this question."""
    if _VIRTUE.search(question):
        return True
    return not _DEFECT.search(question)


def _messages_text(body: dict[str, Any]) -> tuple[str, str]:
    system, user = [], []
    for message in body.get("messages") or []:
        content = message.get("content")
        if isinstance(content, list):
            content = "\n".join(str(p.get("text", "")) for p in content if isinstance(p, dict))
        (system if message.get("role") in ("system", "developer") else user).append(str(content or ""))
    if body.get("system"):  # Anthropic-style body
        system.append(str(body["system"]))
    if isinstance(body.get("instructions"), str):  # Responses API
        system.append(body["instructions"])
    if isinstance(body.get("input"), str):
        user.append(body["input"])
    return "\n".join(system), "\n".join(user)


def _last_string_list(text: str) -> list[str] | None:
    """The last JSON list of strings written into a prompt (claims, statements, contexts)."""
    found = None
    for match in re.finditer(r"\[", text):
        try:
            value, _ = json.JSONDecoder().raw_decode(text, match.start())
        except ValueError:
            continue
        if isinstance(value, list) and value and all(isinstance(v, str) for v in value):
            found = value
    return found


def _schema_reply(name: str, prompt: str) -> str:
    key = name.lower()
    if "verdict" in key:
        items = _last_string_list(prompt) or CLAIMS
        return json.dumps({"verdicts": [{"verdict": "yes", "reason": "Supported by the context."}
                                        for _ in items]})
    if key == "claims":
        return json.dumps({"claims": CLAIMS})
    if key == "truths":
        return json.dumps({"truths": CLAIMS})
    if key == "statements":
        return json.dumps({"statements": CLAIMS})
    if key == "steps":
        return json.dumps({"steps": ["Compare the facts.", "Check for contradictions."]})
    if "reasonscore" in key or key == "reason_score":
        return json.dumps({"reason": "The response matches the expected output.", "score": 10})
    if "reason" in key:
        return json.dumps({"reason": "The score follows from the verdicts."})
    raise ValueError(f"scripted judge has no reply for structured-output schema {name!r}")


def _schema_name(body: dict[str, Any]) -> str | None:
    fmt = body.get("response_format")
    if isinstance(fmt, dict) and fmt.get("type") == "json_schema":
        return str((fmt.get("json_schema") or {}).get("name") or "")
    text_fmt = (body.get("text") or {}).get("format") if isinstance(body.get("text"), dict) else None
    if isinstance(text_fmt, dict) and text_fmt.get("type") == "json_schema":
        return str(text_fmt.get("name") or "")
    return None


def reply_for(body: dict[str, Any], *, system: str | None = None,
              prompt: str | None = None) -> str:
    """The judge's reply text for one request: its body, and the system and user text the
    server read from it (any of the three wire formats); without them, an OpenAI-style body."""
    if prompt is None:
        system, prompt = _messages_text(body)
    system = system or ""
    schema = _schema_name(body)
    # referee's own schema (batched answers) is read off its prompt like its other requests.
    if schema is not None and schema != SCHEMA_NAME:
        return _schema_reply(schema, prompt)
    if '"answers"' in system or '"answers"' in prompt:
        questions = re.findall(r"^\s*(\d+)\.\s+(.+)$", prompt.split("Questions:", 1)[-1], re.MULTILINE)
        declared = re.search(r"Answer all (\d+) question", prompt)
        if declared and int(declared.group(1)) != len(questions):
            raise ValueError(f"batched prompt declares {declared.group(1)} questions, "
                             f"found {len(questions)} numbered lines")
        return json.dumps({"answers": {i: "yes" if good_answer(q) else "no"
                                       for i, q in questions}})
    if '"score"' in system or '"score": <number' in prompt:
        return json.dumps({"score": 0.9, "reason": "Meets the criterion."})
    if re.search(r"\bscore\b.{0,40}\binteger between 0 and 10", prompt):  # deepeval GEval, logprobs path
        return json.dumps({"reason": "The actual output states the expected facts.", "score": 10})
    if '"questions"' in system:
        count = re.search(r"exactly (\d+)", prompt)
        n = int(count.group(1)) if count else 3
        return json.dumps({"questions": [f"Does the response satisfy part {i + 1} of the criterion?"
                                         for i in range(n)]})
    if "JSON array" in prompt:
        return json.dumps(CLAIMS)
    question = re.findall(r"(?:^|\n)(?:Question|Claim):\s*(.+)", prompt)
    if question:
        if "Claim:" in prompt and "supported by the context" in prompt:
            return "Yes"
        return "Yes" if good_answer(question[-1]) else "No"
    if re.search(r"\byes\b.*\bno\b", prompt, re.IGNORECASE | re.DOTALL):
        return "Yes"
    raise ValueError("scripted judge has no reply for this prompt: " + prompt[-300:])
