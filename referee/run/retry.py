"""The old home of ``JudgeRetry``, now ``referee.run.case_retry`` (it re-runs a case; one judge
request's retries are ``referee.judge.retry``). This path is the very same module, so that
imports and patches through it (``referee.run.retry.time.sleep``) keep working."""

import sys

from referee.run import case_retry

sys.modules[__name__] = case_retry
