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
import functools
import re
import types
import typing
from collections.abc import Callable, Iterable, Mapping
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


def checked_again(value: M, what: str) -> M:
    """``value`` (a model user code handed back, and may have changed since it was built)
    as validation would leave it: itself when every field already holds exactly what its
    annotation names, else validated anew (:func:`validated`). Validating every result again
    cost 13-16 us per object against 2-5 us for this check (python -m benchmarks.micro_costs),
    on every case and criterion of a run."""
    return value if well_typed(value) else validated(type(value), dict(value), what)


def well_typed(model: BaseModel) -> bool:
    """Whether each field holds a value of exactly the type its annotation names (nested
    models and list items too), so that validating it again could change nothing. A field
    whose annotation carries validators of its own (a redacted text) is well typed only
    when None."""
    for name, check in _type_plan(type(model)):
        if not check(getattr(model, name)):
            return False
    return True


@functools.cache
def _type_plan(cls: type[BaseModel]) -> tuple[tuple[str, Callable[[Any], bool]], ...]:
    return tuple((name, _type_check(field.annotation)) for name, field in cls.model_fields.items())


def _type_check(annotation: Any) -> Callable[[Any], bool]:
    origin, args = typing.get_origin(annotation), typing.get_args(annotation)
    if annotation is Any:
        return lambda value: True
    if annotation is type(None):
        return lambda value: value is None
    if annotation is float:  # an int is a float to pydantic; a bool is not
        return lambda value: type(value) is float or type(value) is int
    if annotation in (str, int, bool):
        return lambda value: type(value) is annotation
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return lambda value: type(value) is annotation and well_typed(value)
    if origin is typing.Literal:
        kinds = frozenset(type(arg) for arg in args)  # also keeps 1 from matching True
        return lambda value: type(value) in kinds and value in args
    if origin in (typing.Union, types.UnionType):
        others = [arg for arg in args if arg is not type(None)]
        if len(others) == 1 and len(args) == 2:  # Optional[X], the common union
            arm = _type_check(others[0])
            return lambda value: value is None or arm(value)
        arms = tuple(_type_check(arg) for arg in args)
        return lambda value: any(arm(value) for arm in arms)
    if origin is list and len(args) == 1:
        item = _type_check(args[0])
        return lambda value: type(value) is list and all(map(item, value))
    if origin is dict and len(args) == 2 and args[0] is str and args[1] is Any:
        return lambda value: type(value) is dict and all(type(key) is str for key in value)
    return lambda value: False  # validators of its own, or a shape not planned for: validate


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


def unknown_field(error: Mapping[str, Any]) -> UnknownFieldError | None:
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
_names_by_model: WeakKeyDictionary[type[StrictModel], _Names] = WeakKeyDictionary()


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
