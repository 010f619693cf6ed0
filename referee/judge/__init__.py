"""The judge layer: every call to a judge model goes through here.

Configuration and resolution (multivon), 10xgraph's provider detection, the official
SDK providers, per-endpoint concurrency, retries, the reply cache, token/cost accounting and
verdict parsing.
"""

import sys

from referee.errors import JudgeUnavailable
from referee.judge import prompt_caching, reply_cache
from referee.judge.client import Judge, JudgeReply, get_judge, unreadable_replies
from referee.judge.config import (
    DEFAULT_JUDGES,
    DEFAULT_MODELS,
    JudgeConfig,
    get_configured,
    judge_config_for_model,
    provider_available,
    provider_for_model,
    resolve_judge,
    resolve_judge_config,
    split_judge_model,
)
from referee.judge.global_judge import configure, get_global_judge
from referee.judge.panel import JudgePanel
from referee.judge.pricing import Price, estimate_cost, load_prices, price_of, set_price
from referee.judge.prompt_caching import CachingRules, caching_rules, estimate_tokens
from referee.judge.providers import JudgeRequest, ProviderAdapter, RawReply, register_provider
from referee.judge.reply_cache import JudgeCache, default_cache_path, get_cache
from referee.judge.retry import RetryPolicy, parse_retry_after
from referee.judge.verdict import (
    Verdict,
    parse_json_object,
    parse_verdict,
    read_score,
    reply_evidence,
    reply_reason,
    score_problem,
)

# The modules' names before they said what they hold: the reply cache was ``cache``, provider
# prompt caching ``caching``. The old paths are the very same modules, so that imports and
# patches through them keep working.
sys.modules[__name__ + ".cache"] = reply_cache
sys.modules[__name__ + ".caching"] = prompt_caching
cache = reply_cache
caching = prompt_caching

__all__ = [
    "CachingRules",
    "DEFAULT_JUDGES",
    "DEFAULT_MODELS",
    "Judge",
    "JudgeCache",
    "JudgeConfig",
    "JudgePanel",
    "JudgeReply",
    "JudgeRequest",
    "JudgeUnavailable",
    "Price",
    "ProviderAdapter",
    "RawReply",
    "RetryPolicy",
    "Verdict",
    "caching_rules",
    "configure",
    "default_cache_path",
    "estimate_cost",
    "estimate_tokens",
    "get_cache",
    "get_configured",
    "get_global_judge",
    "get_judge",
    "judge_config_for_model",
    "load_prices",
    "parse_json_object",
    "parse_retry_after",
    "parse_verdict",
    "read_score",
    "reply_evidence",
    "reply_reason",
    "score_problem",
    "price_of",
    "provider_available",
    "provider_for_model",
    "register_provider",
    "resolve_judge",
    "resolve_judge_config",
    "set_price",
    "split_judge_model",
    "unreadable_replies",
]
