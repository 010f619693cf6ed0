"""Bring runs from elsewhere into referee: recorded traces and live agent frameworks.

Everything here returns ``EvalCase``/``ExecutionResult``s (or scores them through
``referee.run``); the frameworks are optional extras imported only when used::

    from referee.adapters import score_traces            # message lists, OTLP/JSON spans
    from referee.adapters import OpenAIAgentsAgent        # pip install 'referee[openai-agents]'
    from referee.adapters import LangGraphAgent           # pip install 'referee[langgraph]'
"""

from __future__ import annotations

from referee._lazy import lazy_getattr

_EXPORTS = {
    "RecordedRun": "referee.adapters._base",
    "TraceReader": "referee.adapters._base",
    "register_trace_reader": "referee.adapters._base",
    "TRACE_NOTES_KEY": "referee.adapters._base",
    "execution_from_messages": "referee.adapters._messages",
    "read_otlp": "referee.adapters._otel",
    "read_traces": "referee.adapters._traces",
    "pair_runs": "referee.adapters._traces",
    "score_traces": "referee.adapters._traces",
    "score_traces_async": "referee.adapters._traces",
    "RECORDED_MODEL_ID": "referee.adapters._traces",
    "OpenAIAgentsAgent": "referee.adapters._openai_agents",
    "execution_from_run_result": "referee.adapters._openai_agents",
    "recording_agent_tools": "referee.adapters._agent_tools",
    "LangGraphAgent": "referee.adapters._langgraph",
    "execution_from_langgraph": "referee.adapters._langgraph",
}

__all__ = sorted(_EXPORTS)

__getattr__ = lazy_getattr(__name__, globals(), _EXPORTS)
