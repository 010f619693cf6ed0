"""Every value can be stored: whatever a model or criterion returns is kept, never a reason
to abort a run.

A model, an agent or a criterion may hand back values that JSON cannot hold: arbitrary
objects, bytes, strings with lone surrogates, NaN or infinities. None of them may abort a run
or take its report down. ``make_storable`` returns a copy of a pydantic model in which each
such value is replaced by a faithful stand-in, and lists every replacement as a
``Conversion`` (where it was, what it was, what was stored instead), so that the stored run
says which values are stand-ins.

Stand-ins: ``repr()`` for an object; base64 for bytes that are not UTF-8 (UTF-8 bytes are
stored as their text, as pydantic always stores them, and are not listed);
U+FFFD for each lone surrogate (a surrogate pair becomes its character); the strings
``"NaN"``/``"Infinity"``/``"-Infinity"`` for a non-finite float where any value is allowed,
else ``null`` or ``0.0``; ``repr()`` for a list, dict or model that contains itself or nests
deeper than ``MAX_NESTING`` levels. Values JSON can hold through pydantic (datetimes, enums,
paths, dataclasses, sets) are left for pydantic to store as it always does.
"""

from __future__ import annotations

import base64
import functools
import math
import re
import types
import typing
from typing import Any, TypeVar

from pydantic import BaseModel
from pydantic_core import PydanticSerializationError, to_jsonable_python

M = TypeVar("M", bound=BaseModel)

_SURROGATE = re.compile("[\ud800-\udfff]")
_NON_FINITE_TEXT = {"nan": "NaN", "inf": "Infinity", "-inf": "-Infinity"}
_REPR_CHARS = 2000  # a repr is evidence, not data: enough to recognise the object


class Conversion(BaseModel):
    """One value that was stored as a stand-in."""

    path: str  # where, e.g. "execution.tool_calls[0].result"
    found: str  # what was there, e.g. "Decimal-like object Foo", "bytes (12)", "float nan"
    stored_as: str  # e.g. "repr()", "base64", "U+FFFD for 1 lone surrogate(s)", "\"NaN\""

    def describe(self) -> str:
        return f"{self.path}: {self.found} stored as {self.stored_as}"


def make_storable(model: M) -> tuple[M, list[Conversion]]:
    """``model`` unchanged when JSON can hold all of it, else a copy with marked stand-ins.

    The original (often the user's own object) is never modified.
    """
    if _json_holds(model):
        return model, []
    found = _Found()
    return _model(model, "", found), list(found)


# Containers nested deeper than this are stored as their repr(): walking them (or serialising
# them) would exhaust the interpreter's stack.
MAX_NESTING = 100


class _Found(list):  # type: ignore[type-arg]
    """The conversions found so far, and the containers on the path being walked (a value
    met again on its own path contains itself)."""

    def __init__(self) -> None:
        super().__init__()
        self.open: set[int] = set()


def _json_holds(model: BaseModel) -> bool:
    """Whether JSON holds every value as is: the common case, checked at pydantic's speed.

    Serialising fails on objects, bytes that are not UTF-8 and surrogates. Non-finite floats
    in free-form (``Any``) values come out as the strings "NaN"/"Infinity" of a model
    configured with ``ser_json_inf_nan="strings"`` (a plain string "NaN" only costs the full
    walk); non-finite floats in typed fields are looked at directly.
    """
    if type(model).model_config.get("ser_json_inf_nan") != "strings":
        return False
    try:
        line = model.model_dump_json()
    except (PydanticSerializationError, ValueError):
        return False
    if '"NaN"' in line or 'Infinity"' in line:
        return False
    return _typed_floats_finite(model)


def _typed_floats_finite(model: BaseModel) -> bool:
    for name, kind in _float_plan(type(model)):
        value = getattr(model, name)
        if kind == "float":
            if isinstance(value, float) and not math.isfinite(value):
                return False
        elif isinstance(value, BaseModel):
            if not _typed_floats_finite(value):
                return False
        elif isinstance(value, (list, tuple)):
            if not all(_typed_floats_finite(v) for v in value if isinstance(v, BaseModel)):
                return False
    return True


@functools.cache
def _float_plan(cls: type[BaseModel]) -> tuple[tuple[str, str], ...]:
    """The fields of ``cls`` that are typed floats, or models that (deep down) have some."""
    plan = []
    for name, field in cls.model_fields.items():
        parts = _annotation_parts(field.annotation)
        if float in parts:
            plan.append((name, "float"))
        elif any(isinstance(p, type) and issubclass(p, BaseModel) and p is not cls
                 and _float_plan(p) for p in parts):
            plan.append((name, "model"))
    return tuple(plan)


def _annotation_parts(annotation: Any) -> set[Any]:
    parts = {annotation}
    for arg in typing.get_args(annotation):
        parts |= _annotation_parts(arg)
    return parts


def _model(model: BaseModel, path: str, found: _Found) -> Any:
    updates: dict[str, Any] = {}
    for name, field in type(model).model_fields.items():
        value = getattr(model, name)
        where = f"{path}.{name}" if path else name
        new = _typed(value, field.annotation, where, found)
        if new is not value:
            updates[name] = new
    for name, value in (model.model_extra or {}).items():
        new = _any(value, f"{path}.{name}" if path else name, found)
        if new is not value:
            updates[name] = new
    return model.model_copy(update=updates) if updates else model


def _typed(value: Any, annotation: Any, path: str, found: _Found) -> Any:
    """A model field's value: non-finite floats must keep the field's type."""
    if isinstance(value, float) and not math.isfinite(value) and not _allows_any(annotation):
        replacement = None if _allows_none(annotation) else 0.0
        found.append(Conversion(path=path, found=f"float {value}",
                                stored_as="null" if replacement is None else "0.0"))
        return replacement
    return _any(value, path, found)


def _any(value: Any, path: str, found: _Found) -> Any:
    if value is None or isinstance(value, (bool, int)):
        return value
    if isinstance(value, str):
        return _text(value, path, found)
    if isinstance(value, float):
        if math.isfinite(value):
            return value
        text = _NON_FINITE_TEXT[repr(value)]
        found.append(Conversion(path=path, found=f"float {value}", stored_as=f'"{text}"'))
        return text
    if isinstance(value, (dict, list, tuple, BaseModel)):
        return _container(value, path, found)
    if isinstance(value, (bytes, bytearray, memoryview)):
        return _bytes(bytes(value), path, found)
    try:
        plain = to_jsonable_python(value)
    except Exception:
        found.append(Conversion(path=path, found=f"{type(value).__name__} object",
                                stored_as="repr()"))
        return _safe_repr(value)
    # What pydantic would have stored anyway; only a problem inside it is marked.
    return _any(plain, path, found)


def _container(value: Any, path: str, found: _Found) -> Any:
    open_ = found.open
    if id(value) in open_ or len(open_) >= MAX_NESTING:
        what = ("that contains itself" if id(value) in open_
                else f"nested deeper than {MAX_NESTING} levels")
        found.append(Conversion(path=path, found=f"{type(value).__name__} {what}",
                                stored_as="repr()"))
        return _safe_repr(value)
    open_.add(id(value))
    try:
        if isinstance(value, dict):
            return _mapping(value, path, found)
        if isinstance(value, BaseModel):
            return _model(value, path, found)
        items = [_any(v, f"{path}[{i}]", found) for i, v in enumerate(value)]
        if not any(a is not b for a, b in zip(items, value)):
            return value
        return items if isinstance(value, list) else tuple(items)
    finally:
        open_.discard(id(value))


def _mapping(value: dict[Any, Any], path: str, found: _Found) -> dict[Any, Any]:
    changed = False
    out: dict[Any, Any] = {}
    for key, item in value.items():
        new_key = key
        if isinstance(key, str):
            new_key = _text(key, f"{path} key {_safe_repr(key)}", found)
        elif not (key is None or isinstance(key, (bool, int)) or
                  (isinstance(key, float) and math.isfinite(key))):
            new_key = _safe_repr(key)
            found.append(Conversion(path=f"{path} key {new_key}",
                                    found=f"{type(key).__name__} key", stored_as="repr()"))
        where = f"{path}.{new_key}" if path else str(new_key)
        new_item = _any(item, where, found)
        changed = changed or new_key is not key or new_item is not item
        out[new_key] = new_item
    return out if changed else value


def without_surrogates(text: str) -> str:
    """``text`` as UTF-8 can hold it: a surrogate pair becomes the character it encodes, a
    lone surrogate (half of a cut emoji, say) U+FFFD. ``text`` itself when it has none."""
    if text.isascii() or not _SURROGATE.search(text):  # isascii: O(1) for most prompts
        return text
    return text.encode("utf-16-le", "surrogatepass").decode("utf-16-le", "replace")


SURROGATE_EXPECTED = "valid Unicode text (an escaped emoji needs both halves)"


class LoneSurrogate(ValueError):
    """Text read from a file holds half of a surrogate pair; ``loc`` is where, as path parts."""

    def __init__(self, loc: tuple[Any, ...], code_point: str) -> None:
        super().__init__(f"text holds a lone surrogate {code_point!a}")
        self.loc = loc


def surrogate_pairs_joined(value: Any, loc: tuple[Any, ...] = ()) -> Any:
    """Parsed JSON/YAML ``value`` with each surrogate pair in its text joined into its character
    (YAML reads an escaped emoji as two halves); raises :class:`LoneSurrogate` for a half
    without its partner, which no encoding can send to a model or a judge."""
    if isinstance(value, str):
        joined = without_surrogates(value)
        if joined is not value and joined.count("\ufffd") > value.count("\ufffd"):
            raise LoneSurrogate(loc, _first_lone_surrogate(value))
        return joined
    if isinstance(value, dict):
        return {surrogate_pairs_joined(k, loc): surrogate_pairs_joined(v, (*loc, k))
                for k, v in value.items()}
    if isinstance(value, list):
        return [surrogate_pairs_joined(v, (*loc, i)) for i, v in enumerate(value)]
    return value


def _first_lone_surrogate(text: str) -> str:
    index = 0
    while index < len(text):
        char = text[index]
        if "\ud800" <= char <= "\udbff" and text[index + 1:index + 2] and (
                "\udc00" <= text[index + 1] <= "\udfff"):
            index += 2  # a pair, which without_surrogates joins
        elif "\ud800" <= char <= "\udfff":
            return char
        else:
            index += 1
    return ""


def _text(value: str, path: str, found: _Found) -> str:
    fixed = without_surrogates(value)
    if fixed is value:
        return value
    lone = len(_SURROGATE.findall(value))
    found.append(Conversion(path=path, found=f"text with {lone} surrogate code point(s)",
                            stored_as="U+FFFD for each lone surrogate"))
    return fixed


def _bytes(value: bytes, path: str, found: _Found) -> str:
    try:
        text = value.decode("utf-8")
    except UnicodeDecodeError:
        found.append(Conversion(path=path, found=f"bytes ({len(value)})", stored_as="base64"))
        return base64.b64encode(value).decode("ascii")
    return _text(text, path, found)  # what pydantic stores for UTF-8 bytes: no stand-in


def _safe_repr(value: Any) -> str:
    try:
        text = repr(value)
    except Exception:  # RecursionError included: a value nested without end
        text = f"<{type(value).__name__} object; its repr() raised>"
    text = _SURROGATE.sub("\ufffd", text)
    return text if len(text) <= _REPR_CHARS else text[:_REPR_CHARS] + "…"


def _allows_any(annotation: Any) -> bool:
    return annotation is Any or any(_allows_any(a) for a in _union_args(annotation))


def _allows_none(annotation: Any) -> bool:
    return annotation is None or annotation is type(None) or any(
        _allows_none(a) for a in _union_args(annotation))


def _union_args(annotation: Any) -> tuple[Any, ...]:
    origin = typing.get_origin(annotation)
    if origin is typing.Union or origin is types.UnionType:
        return typing.get_args(annotation)
    return ()
