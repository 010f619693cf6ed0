"""The one place that imports Ray, with the one error that names the extra, and what to set
when a cluster refuses the connection."""

from __future__ import annotations

import os
from types import ModuleType

RAY_EXTRA_HINT = "the Ray backend needs the optional extra: pip install 'referee[ray]'"


def require_ray() -> ModuleType:
    try:
        import ray
    except ImportError:
        raise ImportError(RAY_EXTRA_HINT) from None
    return ray


# Ray 2.60's variables for a cluster started with token authentication: a client sends a token
# only when RAY_AUTH_MODE=token, from RAY_AUTH_TOKEN, else the file named by RAY_AUTH_TOKEN_PATH,
# else ~/.ray/auth_token.
AUTH_MODE_VAR = "RAY_AUTH_MODE"
AUTH_TOKEN_VARS = ("RAY_AUTH_TOKEN", "RAY_AUTH_TOKEN_PATH")


def token_auth_hint() -> str:
    """What to set when a connection failed: a cluster that uses token authentication refuses
    every client without its token, and Ray says only that it could not connect."""
    mode = os.environ.get(AUTH_MODE_VAR, "").strip().lower()
    token_from = [name for name in AUTH_TOKEN_VARS if os.environ.get(name, "").strip()]
    if mode == "token":
        here = (f"here {AUTH_MODE_VAR}=token and the token comes from "
                f"{token_from[0] if token_from else '~/.ray/auth_token'}: check it is the cluster's")
    elif token_from:
        here = (f"here {token_from[0]} is set but {AUTH_MODE_VAR} is not 'token', so Ray does not "
                "send it")
    elif mode:
        here = f"here {AUTH_MODE_VAR}={mode} and no token is set"
    else:
        here = f"here {AUTH_MODE_VAR} and RAY_AUTH_TOKEN are unset"
    return (f"If the cluster uses token authentication, set {AUTH_MODE_VAR}=token and "
            "RAY_AUTH_TOKEN to its token (or RAY_AUTH_TOKEN_PATH to a file holding it; default "
            f"~/.ray/auth_token); {here}")
