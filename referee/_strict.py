"""Models that refuse unknown fields, naming the nearest valid one.

A misspelt key (``expected_tool_trajectroy``) must never be dropped in silence: the expectation
it carried would then be scored against nothing. Every data and config model derives from
:class:`StrictModel`, which

- turns camelCase keys into their snake_case field names (ADK and JSON tools write
  ``evalId``, ``userContent``),
- lets a model translate peer spellings in :meth:`StrictModel._normalise_input`,
- and rejects whatever is left unknown with one line: the field, the closest accepted name, and
  the accepted names.
"""

from __future__ import annotations

import difflib
import re
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any, ClassVar, TypeVar
from weakref import WeakKeyDictionary

from pydantic import BaseModel, ConfigDict, ValidationError, model_validator

_CAMEL_BOUNDARY = re.compile(r"(?<=[a-z0-9])([A-Z])")


def snake_case(name: str) -> str:
    return _CAMEL_BOUNDARY.sub(r"_\1", name).lower()


def nearest_name(key: str, accepted: Iterable[str]) -> str | None:
    close = difflib.get_close_matches(key, list(accepted), n=1, cutoff=0.7)
    return close[0] if close else None


class UnknownFieldError(ValueError):
    """``unknown EvalCase field 'bogus' (did you mean 'tags'?); accepted: ...``

    Pydantic reports it at the enclosing object; ``field`` lets a file loader point at the key
    itself (``pydantic_error["ctx"]["error"].field``).
    """

    def __init__(self, key: str, accepted: Iterable[str], owner: str) -> None:
        close = nearest_name(key, accepted)
        hint = f" (did you mean {close!r}?)" if close else ""
        self.field = key
        self.suggestion = close
        self.accepted = list(accepted)
        self.detail = f"unknown {owner} field{hint}"
        super().__init__(f"unknown {owner} field {key!r}{hint}; accepted: "
                         f"{', '.join(self.accepted)}")


M = TypeVar("M", bound=BaseModel)


def validated(model: type[M], data: dict[str, Any], what: str) -> M:
    """``model`` built from ``data`` that user code handed back (``what`` says whose it is,
    e.g. "model returned a dict"); a wrong field is one ``ValueError`` line naming it."""
    try:
        return model.model_validate(data)
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(part) for part in first["loc"]) or "(the whole value)"
        more = f" (and {exc.error_count() - 1} more)" if exc.error_count() > 1 else ""
        raise ValueError(f"{what} whose field '{where}' is wrong: {first['msg']}, "
                         f"got {type(first.get('input')).__name__}{more}") from None


def unknown_field(error: dict[str, Any]) -> UnknownFieldError | None:
    """The UnknownFieldError behind one entry of ``ValidationError.errors()``, if it is one."""
    cause = (error.get("ctx") or {}).get("error")
    return cause if isinstance(cause, UnknownFieldError) else None


def move_alias(data: dict[str, Any], alias: str, field: str) -> None:
    """Read ``alias`` (a peer's spelling) as ``field``; giving both is an error, not a choice."""
    if alias not in data:
        return
    if field in data:
        raise ValueError(f"{alias!r} and {field!r} name the same field; give one of them")
    data[field] = data.pop(alias)


class StrictModel(BaseModel):
    """A pydantic model whose constructor and ``model_validate`` refuse unknown keys."""

    model_config = ConfigDict(extra="forbid", populate_by_name=True)

    # Names a subclass reads in _normalise_input besides its fields (peer spellings).
    _input_aliases: ClassVar[frozenset[str]] = frozenset()

    @classmethod
    def accepted_names(cls) -> tuple[str, ...]:
        """Every key this model reads: its fields in order, then their aliases and the peer
        spellings it translates."""
        return _names_of(cls).accepted

    @classmethod
    def _normalise_input(cls, data: dict[str, Any]) -> dict[str, Any]:
        """Translate peer spellings and shapes into this model's fields (subclasses override)."""
        return data

    @model_validator(mode="before")
    @classmethod
    def _accept_known_names(cls, data: Any) -> Any:
        if not isinstance(data, dict):
            return data
        names = _names_of(cls)
        # A copy either way: _normalise_input may pop keys, and the dict may be the caller's.
        if all(k in names.accepted_set for k in data):
            data = dict(data)
        else:
            data = {(snake_case(k) if isinstance(k, str) and k not in names.accepted_set
                     and snake_case(k) in names.accepted_set else k): v for k, v in data.items()}
        data = cls._normalise_input(data)
        if cls.model_config.get("extra") != "forbid":
            return data
        fields = names.fields
        for key in data:
            if key not in fields:
                raise UnknownFieldError(str(key), names.accepted, cls.__name__)
        return data


@dataclass(frozen=True)
class _Names:
    accepted: tuple[str, ...]   # fields in order, then aliases and peer spellings
    accepted_set: frozenset[str]
    fields: frozenset[str]      # the keys left after _normalise_input that a model takes


# A model's names are fixed once its class is built, and every construction (a judge config per
# evaluator call, a result per criterion) checks its keys against them: worked out once per class.
_names_by_model: "WeakKeyDictionary[type[StrictModel], _Names]" = WeakKeyDictionary()


def _names_of(model: type[StrictModel]) -> _Names:
    names = _names_by_model.get(model)
    if names is None:
        fields = list(model.model_fields)
        extra: set[str] = set(model._input_aliases)
        for info in model.model_fields.values():
            alias = info.validation_alias
            if isinstance(alias, str):
                extra.add(alias)
            else:
                extra.update(c for c in getattr(alias, "choices", None) or [] if isinstance(c, str))
        accepted = tuple(fields + sorted(extra - set(fields)))
        names = _names_by_model[model] = _Names(
            accepted=accepted, accepted_set=frozenset(accepted),
            fields=frozenset(fields) | {n for n in accepted if n not in model._input_aliases})
    return names


def with_positions(owner: str, names: tuple[str, ...], positional: tuple[Any, ...],
                   fields: dict[str, Any]) -> dict[str, Any]:
    """``fields`` plus ``positional`` under ``names``, for peers whose models are dataclasses
    (multivon's ``EvalCase("question", "answer")``)."""
    if len(positional) > len(names):
        raise TypeError(f"{owner} takes at most {len(names)} positional arguments "
                        f"({', '.join(names)}); pass the rest by name")
    for key, value in zip(names, positional):
        if key in fields:
            raise TypeError(f"{owner} got {key!r} twice")
        fields[key] = value
    return fields
