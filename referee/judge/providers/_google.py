"""Google's Gemini API (and Vertex AI) through the ``google-genai`` SDK, the ``google`` extra."""

from __future__ import annotations

import functools
import importlib
import importlib.util
import os
import re
from typing import TYPE_CHECKING, Any

from referee.content._rules import GEMINI_CONTENT
from referee.content._wire import around_prompt, gemini_parts
from referee.judge.providers._base import (
    CachingRules,
    JudgeRequest,
    ProviderRules,
    ProviderSetupError,
    RawReply,
    as_int,
)
from referee.judge.retry import MalformedReply

if TYPE_CHECKING:
    from referee.judge.config import JudgeConfig

# Implicit caching exists from Gemini 2.5 on; the minimum rose with the model generation
# (checked 2026-12-01, referee.judge.prompt_caching).
_GEMINI_VERSION = re.compile(r"gemini-(\d+(?:\.\d+)?)")
_CACHE_MINIMUMS = ((3.0, 4096), (2.5, 2048))
# The endpoint key of Vertex AI (``credentials``): Google's own, never sent anywhere.
VERTEX = "vertex"


def _use_vertex() -> bool:
    return os.environ.get("GOOGLE_GENAI_USE_VERTEXAI", "").strip().lower() in ("1", "true", "yes",
                                                                                "on")


def _import_genai() -> Any:
    try:
        # import_module, not "from google import genai": the latter is satisfied by the
        # attribute an earlier import left on the google package even when the module is gone.
        genai = importlib.import_module("google.genai")
    except ImportError:
        raise ProviderSetupError(
            "the google judge provider needs the google-genai package: "
            "pip install 'referee[google]'") from None
    return genai


@functools.cache
def _takes_json_schema(config_type: type) -> bool:
    """Older google-genai releases have no ``response_json_schema``: JSON mode alone is sent."""
    return "response_json_schema" in getattr(config_type, "model_fields", {})


class GoogleAdapter(ProviderRules):
    content_rules = GEMINI_CONTENT
    default_model = "gemini-2.5-flash"
    own_hosts = ("generativelanguage.googleapis.com", "aiplatform.googleapis.com")
    prefix_aliases = ("gemini",)
    credentials_hint = ("Google", "GOOGLE_API_KEY (or GEMINI_API_KEY)")

    def names_model(self, name: str) -> bool:
        return name.startswith("gemini")

    def available(self, base_url: str) -> bool:
        if importlib.util.find_spec("google.genai") is None:
            return False
        return _use_vertex() or bool(os.environ.get("GOOGLE_API_KEY")
                                     or os.environ.get("GEMINI_API_KEY"))

    def is_own_endpoint(self, base_url: str) -> bool:
        return base_url == VERTEX or super().is_own_endpoint(base_url)

    def caching_rules(self, model: str) -> CachingRules | None:
        version = _GEMINI_VERSION.search(model)
        if version is None:  # an alias such as "gemini-flash-latest": a current model
            return CachingRules("google", min_tokens=_CACHE_MINIMUMS[0][1])
        found = next((m for since, m in _CACHE_MINIMUMS if float(version.group(1)) >= since),
                     None)
        return CachingRules("google", min_tokens=found) if found is not None else None

    def credentials(self, cfg: JudgeConfig) -> tuple[str, str | None]:
        _import_genai()
        api_key = (cfg.api_key_value() or os.environ.get("GOOGLE_API_KEY")
                   or os.environ.get("GEMINI_API_KEY") or None)
        if api_key is None and not _use_vertex():
            raise ProviderSetupError(
                "no Google API key: set GOOGLE_API_KEY (or GEMINI_API_KEY), "
                "GOOGLE_GENAI_USE_VERTEXAI=true for Vertex AI, or JudgeConfig(api_key=...)")
        base_url = cfg.base_url
        if _use_vertex() and not cfg.api_key_value():
            base_url = base_url or VERTEX  # distinct endpoint key; never sent anywhere
        return base_url, api_key

    def make_client(self, base_url: str, api_key: str | None, cfg: JudgeConfig) -> Any:
        genai = _import_genai()
        from google.genai import types

        http_options = types.HttpOptions(
            base_url=base_url if base_url and base_url != VERTEX else None,
            timeout=int(cfg.effective_timeout * 1000),
            retry_options=types.HttpRetryOptions(attempts=1),
        )
        if base_url == VERTEX:
            return genai.Client(vertexai=True, http_options=http_options)
        return genai.Client(api_key=api_key, vertexai=False if api_key else None,
                            http_options=http_options)

    async def call(self, client: Any, request: JudgeRequest) -> RawReply:
        from google.genai import types

        schema: dict[str, Any] = {}
        if request.json_schema is not None and _takes_json_schema(types.GenerateContentConfig):
            schema["response_json_schema"] = dict(request.json_schema)
        config = types.GenerateContentConfig(
            system_instruction=request.system or None,
            temperature=request.temperature,
            max_output_tokens=request.max_tokens,
            response_mime_type="application/json" if request.json_mode else None,
            **schema,
            http_options=types.HttpOptions(timeout=int(request.timeout * 1000),
                                           retry_options=types.HttpRetryOptions(attempts=1)),
        )
        contents: Any = request.prompt if not request.parts else [{
            "role": "user", "parts": gemini_parts(
                around_prompt(request.prompt, request.prompt_prefix, request.parts))}]
        response = await client.aio.models.generate_content(model=request.model,
                                                            contents=contents,
                                                            config=config)
        candidates = getattr(response, "candidates", None)
        if candidates is None:
            raise MalformedReply("generateContent reply has no candidates")
        parts: list[str] = []
        truncated = False
        if candidates:
            reason = getattr(candidates[0], "finish_reason", None)
            truncated = str(getattr(reason, "name", reason)) == "MAX_TOKENS"
            content = getattr(candidates[0], "content", None)
            for part in getattr(content, "parts", None) or []:
                if getattr(part, "thought", False):
                    continue  # thought summaries are not the answer
                parts.append(getattr(part, "text", None) or "")
        usage = getattr(response, "usage_metadata", None)
        http = getattr(response, "sdk_http_response", None)
        return RawReply(text="".join(parts),
                        input_tokens=as_int(getattr(usage, "prompt_token_count", 0)),
                        output_tokens=as_int(getattr(usage, "candidates_token_count", 0)),
                        model=getattr(response, "model_version", None) or request.model,
                        cached_input_tokens=as_int(getattr(usage, "cached_content_token_count", 0)),
                        truncated=truncated,
                        headers=getattr(http, "headers", None))
