"""Issue 7, item 6: API keys never reach run directories, reports, logs, the cache or errors.

Distinctive fake keys are set in the environment (and one is passed explicitly). The scripted
judge plays the worst provider: on some cases it answers 401 with the caller's own key echoed
in the error body, on others 429 first (so retries get logged). Then every artefact is
scanned for the keys: the run directory (every file, as bytes, in every report format), the
console output, stdout/stderr, every log record, the judge cache's bytes, and the messages,
reprs and chained tracebacks of the exceptions a user would see.
"""

from __future__ import annotations

import json
import logging
import traceback
from pathlib import Path

import pytest
from pydantic import SecretStr
from reliability_support import case_input, case_of

from referee import CriterionConfig, EvalCase, EvalSuite
from referee.criteria.llm import ResponseMatchCriterion
from referee.errors import EvalGateFailure, JudgeUnavailable
from referee.evaluators import CustomRubric, GEval
from referee.judge import JudgeConfig, configure, get_judge
from referee.report.model import CaseStatus
from referee.testing import Fault, RecordedRequest, ScriptedJudgeServer

# Not every key is "sk-"-shaped: gateways and proxies hand out keys of any form.
OPENAI_KEY = "gw-CANARY-openai-7f3a9c2e5b1d4f6a8c0e2b4d6f8a1c3e"
ANTHROPIC_KEY = "sk-ant-api03-CANARYanthropicKey4b6d8f0a2c4e6a8b0d2f4a6c8e0"
EXPLICIT_KEY = "sk-CANARYexplicitKey9e8d7c6b5a4f3e2d1c0b9a8f7e6d5c4b"
KEYS = (OPENAI_KEY, ANTHROPIC_KEY, EXPLICIT_KEY)

REJECTED = {2, 5}  # the judge answers 401 with the caller's key in the error body
THROTTLED = {3}  # the judge answers 429 once first
N_CASES = 7


def _presented_key(request: RecordedRequest) -> str:
    auth = request.headers.get("authorization", "")
    return auth.removeprefix("Bearer ").strip() or request.headers.get("x-api-key", "")


class LeakyJudge:
    def __init__(self) -> None:
        self.throttled: set[str] = set()

    def __call__(self, request: RecordedRequest):
        case = case_of(request)
        key = _presented_key(request)
        assert key in KEYS, "the test must present one of its canary keys"
        if case in REJECTED:
            message = f"Incorrect API key provided: {key}. You can find your API key at ..."
            if request.provider == "anthropic":
                body = {"type": "error", "error": {"type": "authentication_error",
                                                   "message": message}}
            else:
                body = {"error": {"message": message, "type": "invalid_request_error",
                                  "param": None, "code": "invalid_api_key"}}
            return Fault.http(401, body=json.dumps(body))
        if case in THROTTLED and request.prompt not in self.throttled:
            self.throttled.add(request.prompt)
            return Fault.rate_limit(retry_after=0)
        if "exactly one word" in request.prompt:
            return "Yes"
        return json.dumps({"score": 0.9, "reason": "matches", "reasoning": "matches"})


def _scan(label: str, blob: str | bytes) -> list[str]:
    data = blob.encode("utf-8", "surrogateescape") if isinstance(blob, str) else blob
    return [f"{label} contains {key[:12]}..." for key in KEYS if key.encode() in data]


@pytest.fixture
def leaky_env(monkeypatch: pytest.MonkeyPatch, tmp_path: Path):
    with ScriptedJudgeServer(LeakyJudge()) as server:
        for name in ("JUDGE_PROVIDER", "JUDGE_MODEL", "REFEREE_JUDGE_CONCURRENCY",
                     "ANTHROPIC_BASE_URL", "REFEREE_DEBUG"):
            monkeypatch.delenv(name, raising=False)
        monkeypatch.setenv("OPENAI_API_KEY", OPENAI_KEY)
        monkeypatch.setenv("ANTHROPIC_API_KEY", ANTHROPIC_KEY)
        # Document 000's criteria find their OpenAI endpoint the documented way: the environment.
        monkeypatch.setenv("OPENAI_BASE_URL", server.base_url("openai"))
        monkeypatch.setenv("REFEREE_CACHE", "1")
        monkeypatch.setenv("REFEREE_CACHE_DIR", str(tmp_path / "cache"))
        configure(None)
        yield server
        configure(None)


def test_no_key_in_any_artefact(leaky_env: ScriptedJudgeServer, tmp_path: Path,
                                caplog: pytest.LogCaptureFixture,
                                capfd: pytest.CaptureFixture[str]) -> None:
    server = leaky_env
    # Keys from the environment (no api_key on the config) and one passed explicitly.
    openai_env = JudgeConfig(provider="openai", model="gpt-4o-mini", base_url=server.base_url(),
                             max_retries=1)
    anthropic_env = JudgeConfig(provider="anthropic", model="claude-haiku-4-5",
                                base_url=server.base_url("anthropic"), max_retries=1)
    explicit = JudgeConfig(provider="openai", model="gpt-4o-mini", api_style="responses",
                           base_url=server.base_url(), api_key=SecretStr(EXPLICIT_KEY),
                           max_retries=1)
    suite = EvalSuite("secrets")
    suite.add_cases([EvalCase(input=case_input(i), expected_output=f"{case_input(i)} 30 days")
                     for i in range(N_CASES)])
    suite.add_evaluators(
        CustomRubric([("Is the window stated?", True)], name="rubric_env_openai",
                     judge=openai_env),
        CustomRubric([("Is it polite?", True)], name="rubric_env_anthropic",
                     judge=anthropic_env),
        GEval("accurate", runs=1, judge=explicit),
        ResponseMatchCriterion(CriterionConfig.response_match(judge_model="gpt-4o-mini",
                                                               num_samples=1)),
    )
    runs = tmp_path / "runs"
    caplog.set_level(logging.DEBUG, logger="referee")
    with pytest.raises(EvalGateFailure) as gate:
        suite.run(lambda prompt: "Refunds within 30 days. " + prompt, verbose=True,
                  max_error_rate=0.0, runs_dir=runs, formats=["console", "json", "junit", "html"])
    report = gate.value.report

    # The run really met the faults: rejected cases are judge errors, throttled ones recovered.
    statuses = {c.index: c.status for c in report.cases}
    assert {i for i, s in statuses.items() if s is CaseStatus.JUDGE_ERROR} == REJECTED
    assert all(statuses[i] is CaseStatus.PASSED for i in THROTTLED)
    assert "HTTP 429" in caplog.text and "HTTP 401" in report.cases[2].error
    # ... and every key really was sent to the judge, so not finding it below means something.
    presented = {_presented_key(r) for r in server.requests}
    assert presented == set(KEYS)

    leaks: list[str] = []
    [run_dir] = list(runs.iterdir())
    files = sorted(p for p in run_dir.rglob("*") if p.is_file())
    assert {"meta.json", "cases.jsonl", "report.json", "results.json", "junit.xml",
            "report.html"} <= {p.name for p in files}
    for path in files:
        leaks += _scan(str(path.relative_to(tmp_path)), path.read_bytes())
    cache_files = sorted((tmp_path / "cache").glob("judge_cache.sqlite3*"))
    assert cache_files, "the judge cache was not used"
    for path in cache_files:
        leaks += _scan(path.name, path.read_bytes())
    out, err = capfd.readouterr()
    leaks += _scan("stdout", out) + _scan("stderr", err)
    leaks += _scan("log records", caplog.text)
    leaks += _scan("log arguments", repr([(r.msg, r.args) for r in caplog.records]))
    leaks += _scan("gate failure", f"{gate.value}\n{gate.value!r}")
    for case in report.cases:
        leaks += _scan(f"case {case.index} error", case.error or "")
    leaks += _scan("configs", "".join(f"{c!r}{c}{c.model_dump_json()}"
                                      for c in (openai_env, anthropic_env, explicit)))
    assert leaks == []


@pytest.mark.parametrize("config", ["env-openai", "env-anthropic", "explicit"])
async def test_judge_errors_carry_no_key_in_message_or_traceback(leaky_env: ScriptedJudgeServer,
                                                                 config: str) -> None:
    server = leaky_env
    cfg = {
        "env-openai": JudgeConfig(provider="openai", base_url=server.base_url(), max_retries=0,
                                  cache=False),
        "env-anthropic": JudgeConfig(provider="anthropic", base_url=server.base_url("anthropic"),
                                     max_retries=0, cache=False),
        "explicit": JudgeConfig(provider="openai", api_style="responses", max_retries=0,
                                base_url=server.base_url(), api_key=SecretStr(EXPLICIT_KEY),
                                cache=False),
    }[config]
    with pytest.raises(JudgeUnavailable) as info:
        await get_judge(cfg).complete(f"{case_input(2)} is this right?")
    assert "HTTP 401" in str(info.value)
    # What a user sees printed, logged with logger.exception, or formatted by a CI runner.
    shown = "".join(traceback.format_exception(info.value))
    assert "Incorrect API key provided" in shown or "401" in shown
    leaks = _scan("message", str(info.value)) + _scan("repr", repr(info.value))
    leaks += _scan("formatted traceback", shown)
    assert leaks == []


# Issue 10, section 5: redaction before truncation, literal keys, base URL passwords ----------

GATEWAY_KEY = "gwkey-CANARY-7f3a9c2e5b1d4f6a8c0e2b4d6f8a1c3e5b7d9f"  # no known key shape


def _pieces(secret: str, size: int = 6) -> list[str]:
    return [secret[i:i + size] for i in range(len(secret) - size + 1)]


def _leaks_in_part(text: str, secret: str) -> list[str]:
    return [piece for piece in _pieces(secret) if piece in text]


@pytest.mark.parametrize("source", ["environment", "explicit"])
async def test_a_key_echoed_in_a_long_gateway_error_never_survives_even_in_part(
        monkeypatch: pytest.MonkeyPatch, source: str) -> None:
    def gateway(request: RecordedRequest):
        # The key lands at a different offset each time, so one of them straddles every cut.
        pad = int(request.prompt.split("pad=")[1].split()[0])
        message = ("upstream said: " + "x" * pad + f" rejected key {_presented_key(request)} "
                   + "for this route; " * 20)
        return Fault.http(403, body=json.dumps({"error": {"message": message}}))

    monkeypatch.delenv("OPENAI_BASE_URL", raising=False)
    if source == "environment":
        monkeypatch.setenv("OPENAI_API_KEY", GATEWAY_KEY)
        key = None
    else:
        monkeypatch.delenv("OPENAI_API_KEY", raising=False)
        key = SecretStr(GATEWAY_KEY)
    with ScriptedJudgeServer(gateway) as server:
        judge = get_judge(JudgeConfig(provider="openai", base_url=server.base_url(),
                                      api_key=key, max_retries=0, cache=False))
        for pad in range(100, 220, 7):
            with pytest.raises(JudgeUnavailable) as info:
                await judge.complete(f"pad={pad} is this right?")
            shown = f"{info.value}\n{info.value!r}\n" + "".join(
                traceback.format_exception(info.value))
            assert "rejected key" in shown or pad > 150  # the excerpt really was cut there
            assert _leaks_in_part(shown, GATEWAY_KEY) == [], (pad, str(info.value))


PASSWORD = "pw-CANARY-9d8c7b6a5f4e3d2c"


def test_a_password_in_a_base_url_is_never_stored_or_printed(
        monkeypatch: pytest.MonkeyPatch, tmp_path: Path,
        capfd: pytest.CaptureFixture[str], caplog: pytest.LogCaptureFixture) -> None:
    for name in ("OPENAI_API_KEY", "OPENAI_BASE_URL", "JUDGE_PROVIDER", "JUDGE_MODEL"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("REFEREE_CACHE", "0")
    configure(None)

    def judge(request: RecordedRequest):
        if case_of(request) == 1:  # a server error that quotes the URL it was called at
            url = f"http://proxy:{PASSWORD}@127.0.0.1{request.path}"
            return Fault.http(400, body=json.dumps({"error": {"message": f"bad route {url}"}}))
        if "exactly one word" in request.prompt:
            return "Yes"
        return json.dumps({"score": 0.9, "reasoning": "matches"})

    with ScriptedJudgeServer(judge) as server:
        url = server.base_url().replace("http://", f"http://proxy:{PASSWORD}@")
        judge_config = JudgeConfig(provider="openai", base_url=url, max_retries=0, cache=False)
        criterion_config = CriterionConfig(judge_model="openai/gpt-4o-mini", base_url=url,
                                           num_samples=1, api_style="chat")
        suite = EvalSuite("passwords")
        suite.add_cases([EvalCase(input=case_input(i), expected_output="30 days")
                         for i in range(3)])
        suite.add_evaluators(CustomRubric([("Is the window stated?", True)], judge=judge_config),
                             ResponseMatchCriterion(criterion_config))
        caplog.set_level(logging.DEBUG, logger="referee")
        report = suite.run(lambda p: f"30 days {p}", verbose=True, runs_dir=tmp_path / "runs",
                           formats=["console", "json", "junit", "html"])
        assert server.request_count >= 6  # the password-bearing URL was really used
    assert report.cases[1].status is CaseStatus.JUDGE_ERROR
    assert "bad route http://proxy:***@" in report.cases[1].error
    shown = f"{judge_config!r} {judge_config} {criterion_config!r} {criterion_config}"
    assert "proxy:***@" in shown
    out, err = capfd.readouterr()
    assert "proxy:***@127.0.0.1" in err  # the judge named up front, password masked
    blobs = {"stdout": out, "stderr": err, "logs": caplog.text, "reprs": shown,
             "report": report.model_dump_json()}
    for path in (tmp_path / "runs").rglob("*"):
        if path.is_file():
            blobs[path.name] = path.read_text(encoding="utf-8", errors="replace")
    assert [name for name, blob in blobs.items() if PASSWORD in blob] == []


def test_a_key_at_the_cut_of_a_long_html_field_is_redacted_whole(
        monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    from referee.evaluators.deterministic import Contains
    from referee.report.html import MAX_FIELD_CHARS

    monkeypatch.setenv("OPENAI_API_KEY", GATEWAY_KEY)
    output = "x" * (MAX_FIELD_CHARS - 10) + GATEWAY_KEY + "y" * 50  # the key straddles the cut
    suite = EvalSuite("long").add_cases([EvalCase(input="q")])
    suite.add_evaluators(Contains("30 days"))
    suite.run(lambda p: output, verbose=False, runs_dir=tmp_path, formats=["html"])
    [page] = list(tmp_path.rglob("report.html"))
    assert _leaks_in_part(page.read_text(encoding="utf-8"), GATEWAY_KEY) == []
