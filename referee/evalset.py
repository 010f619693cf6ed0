"""EvalSet: a named list of cases, and the case files it is loaded from and saved to.

Formats, chosen by file name:

- ``.json`` / ``.evalset.json``: an EvalSet object (``eval_set_id``, ``name``, ``description``,
  ``eval_cases``) or a plain list of cases;
- ``.jsonl``: one case object per line (blank lines are skipped);
- ``.yaml`` / ``.yml``: the same shapes as JSON;
- ``.csv``: one case per row. Columns ``input``, ``expected_output``, ``context`` (text, or a JSON
  list of chunks), ``tags`` (comma-separated or a JSON list), ``name``, ``description``,
  ``eval_id``, ``expected_tool_trajectory`` / ``expected_node_order`` (JSON lists, or
  comma-separated names), ``conversation`` (JSON list of turns), ``metadata`` (JSON object) and
  ``metadata.KEY`` (one metadata entry as text), and ``image`` / ``images`` / ``document``:
  images or PDFs added to the row's input after its text, each a path relative to the CSV
  file's folder, a ``data:`` URL or a URL; several in one cell are separated by ``|`` (a data
  URL holds ``;`` and ``,``, never ``|``). Any other column is an error naming it.

In JSON, JSONL and YAML, ``input``, ``context``, ``expected_output`` and a turn's
``user_content`` and ``expected_final_response`` may be lists of parts: text, ``{image:
shots/chart.png}``, ``{pdf: docs/q3.pdf}`` (paths relative to the case file's folder), data
URLs, URLs, or a provider's part shapes (see :mod:`referee.content`).

Google ADK eval sets (``.evalset.json`` as ADK writes them: ``session_input``,
``conversation[].user_content.parts[].text``, ``final_response``, ``intermediate_data`` with
``tool_uses`` or ``invocation_events``, whose authors give the expected node order,
``conversation_scenario`` (a case with no turn of its own, run through the user simulator),
``rubrics``, creation timestamps, camelCase spellings) load into the same model, and so does
ADK's legacy list (``[{name, data: [{query, expected_tool_use, reference}], initial_session}]``,
which ADK converts the same way); ``save(path, format="adk")`` writes one back, unchanged for a
file that was read and not edited. Both are :mod:`referee.compat.adk`'s, applied here where
the file is read, never inside the case model. The JSON
files 10xgraph's ``EvalSet.to_file`` writes load as well, and 10xgraph's ``EvalSetBuilder`` and
``create_simple_eval_set`` build sets in code.

A malformed file raises :class:`referee.errors.InputError` naming the file, the line (or the path
inside the document) and the field, e.g. ``cases.jsonl:7: field 'expected_output': Input should
be a valid string``. Unknown keys in a case are errors too: a typo must not silently drop an
expectation.
"""

from __future__ import annotations

import csv
import io
import json
import re
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml
from pydantic import Field, ValidationError, model_validator

from referee._strict import StrictModel, move_alias, nearest_name, snake_case, unknown_field
from referee.case import EvalCase, Invocation, ToolCall
from referee.compat import adk
from referee.content._load import holds_media, is_part, load_part
from referee.content._parts import ContentError, DocumentPart, ImagePart, TextPart, sha256_hex
from referee.errors import InputError, beyond_python_limits
from referee.formats import csv_rows, jsonl_values, parse_json, parse_yaml, read_text
from referee.storable import SURROGATE_EXPECTED, LoneSurrogate, surrogate_pairs_joined

_SUFFIXES = ".evalset.json, .json, .jsonl, .yaml, .yml or .csv"
_CSV_COLUMNS = ("eval_id", "name", "description", "input", "expected_output", "context", "tags",
                "expected_tool_trajectory", "expected_node_order", "conversation", "metadata",
                "images", "documents", "image", "document")
# The columns whose cells name images or PDFs added to the row's input, and their kind.
_CSV_MEDIA_COLUMNS = {"image": "image", "images": "image", "document": "pdf", "documents": "pdf"}
_CSV_MEDIA_SEPARATOR = "|"
_CSV_METADATA_PREFIX = "metadata."
_FORMATS = ("referee", "adk")

Loc = tuple[Any, ...]


class EvalSet(StrictModel):
    """A named, ordered list of :class:`EvalCase`; case ids must be unique within it.

    10xgraph's ``add_case``, ``get_case``, ``filter_by_tags``, ``to_file``/``from_file`` and
    iteration work as there; ``to_file``/``from_file`` read and write every format ``load`` and
    ``save`` know.
    """

    _input_aliases = frozenset({"cases"})

    eval_set_id: str = ""
    name: str = ""
    description: str = ""
    eval_cases: list[EvalCase] = Field(default_factory=list)
    metadata: dict[str, Any] = Field(default_factory=dict)

    @classmethod
    def _normalise_input(cls, data: dict[str, Any]) -> dict[str, Any]:
        move_alias(data, "cases", "eval_cases")
        return data

    @model_validator(mode="after")
    def _ids(self) -> EvalSet:
        if not self.eval_set_id:
            slug = re.sub(r"[^A-Za-z0-9_.-]+", "-", self.name).strip("-").lower()
            self.eval_set_id = slug or "evalset"
        first_seen: dict[str, int] = {}
        for index, case in enumerate(self.eval_cases):
            if case.eval_id in first_seen:
                # Results and resumed runs are keyed by eval_id, so a repeat would overwrite.
                raise ValueError(
                    f"eval_cases[{index}] repeats eval_id {case.eval_id!r} of "
                    f"eval_cases[{first_seen[case.eval_id]}]; give each case a distinct eval_id"
                )
            first_seen[case.eval_id] = index
        return self

    def __len__(self) -> int:
        return len(self.eval_cases)

    def __iter__(self) -> Iterator[EvalCase]:  # type: ignore[override]  # iterate cases, as 10xgraph
        return iter(self.eval_cases)

    @property
    def cases(self) -> list[EvalCase]:
        return self.eval_cases

    def add_case(self, case: EvalCase | dict[str, Any]) -> None:
        """Append a case; its eval_id must be new to the set."""
        case = case if isinstance(case, EvalCase) else EvalCase.model_validate(case)
        if self.get_case(case.eval_id) is not None:
            raise ValueError(f"the set already has a case with eval_id {case.eval_id!r}; "
                             "give each case a distinct eval_id")
        self.eval_cases.append(case)

    def get_case(self, eval_id: str) -> EvalCase | None:
        return next((c for c in self.eval_cases if c.eval_id == eval_id), None)

    def filter_by_tags(self, tags: Sequence[str]) -> list[EvalCase]:
        """The cases that carry every one of ``tags``."""
        return [c for c in self.eval_cases if all(tag in c.tags for tag in tags)]

    @classmethod
    def from_file(cls, path: str | Path) -> EvalSet:
        return cls.load(path)

    def to_file(self, path: str | Path, format: str = "referee") -> None:
        self.save(path, format=format)

    @classmethod
    def from_cases(cls, cases: Iterable[EvalCase | dict[str, Any]], **fields: Any) -> EvalSet:
        return cls(eval_cases=[c if isinstance(c, EvalCase) else EvalCase.model_validate(c)
                               for c in cases], **fields)

    @classmethod
    def load(cls, path: str | Path) -> EvalSet:
        """Read a case file; its format follows from the file name (see the module docstring)."""
        path = Path(path)
        source = str(path)
        kind = _kind(path)
        text = read_text(path)
        default_id = path.name.split(".")[0]
        try:
            if kind == "jsonl":
                return cls._assemble(_read_jsonl(text, source), {}, default_id, source, None)
            if kind == "csv":
                return cls._assemble(_read_csv(text, source), {}, default_id, source, None)
            data = parse_json(text, source) if kind == "json" else parse_yaml(text, source)
            header, cases, prefix = _split_document(data, source)
            located: list[tuple[Any, int | None, tuple[Any, ...]]] = [
                (case, None, (*prefix, i)) for i, case in enumerate(cases)]
            return cls._assemble(located, header, default_id, source, text)
        except RecursionError as exc:
            raise beyond_python_limits(exc, source=source, text=text) from None

    @classmethod
    def _assemble(cls, located: list[tuple[Any, int | None, Loc]], header: dict[str, Any],
                  default_id: str, source: str, text: str | None) -> EvalSet:
        cases = [_validate_case(raw, source, line, loc, text) for raw, line, loc in located]
        first_seen: dict[str, str] = {}
        for case, (_, line, loc) in zip(cases, located):
            here = f"line {line}" if line else _path(loc)
            if case.eval_id in first_seen:
                raise InputError(f"repeats eval_id {case.eval_id!r} first used at "
                                 f"{first_seen[case.eval_id]}", source=source,
                                 line=line or _line_of(text, loc), field=_path((*loc, "eval_id")),
                                 expected="a distinct eval_id per case")
            first_seen[case.eval_id] = here
        fields = {k: v for k, v in header.items() if k not in ("eval_cases", "cases")}
        for key in ("eval_set_id", "name", "description"):
            value = fields.get(key)
            if value is not None and not isinstance(value, str):
                raise InputError("should be a string", source=source, field=key,
                                 line=_line_of(text, (key,)))
        if not fields.get("eval_set_id"):
            fields["eval_set_id"] = default_id
        if not fields.get("name"):
            fields["name"] = fields["eval_set_id"]
        try:
            return cls(eval_cases=cases, **fields)
        except ValidationError as exc:
            err = exc.errors()[0]
            raise InputError(_plain(err["msg"]), source=source) from None

    def to_adk(self) -> dict[str, Any]:
        """The set as a Google ADK EvalSet document (see :mod:`referee.compat.adk`)."""
        return adk.write_set(self)

    def save(self, path: str | Path, format: str = "referee") -> None:
        """Write the set in the format its file name names; ``load`` reads it back unchanged.

        ``format="adk"`` writes a Google ADK eval set (a ``.json`` file name, such as
        ``name.evalset.json``).
        """
        path = Path(path)
        kind = _kind(path)
        if format not in _FORMATS:
            raise ValueError(f"unknown case file format {format!r}; expected one of {_FORMATS}")
        if format == "adk":
            if kind != "json":
                raise InputError("an ADK eval set is JSON", source=str(path),
                                 expected="a .json or .evalset.json file name")
            text = json.dumps(self.to_adk(), indent=2, ensure_ascii=False) + "\n"
            path.write_text(text, encoding="utf-8")
            return
        if kind == "jsonl":
            text = "".join(json.dumps(_case_dict(c), ensure_ascii=False) + "\n"
                           for c in self.eval_cases)
        elif kind == "csv":
            text = _write_csv(self.eval_cases, path.parent)
        else:
            document: dict[str, Any] = {"eval_set_id": self.eval_set_id, "name": self.name,
                        "description": self.description,
                        "eval_cases": [_case_dict(c) for c in self.eval_cases]}
            if self.metadata:
                document["metadata"] = self.metadata
            if kind == "json":
                text = json.dumps(document, indent=2, ensure_ascii=False) + "\n"
            else:
                text = yaml.safe_dump(document, sort_keys=False, allow_unicode=True)
        path.write_text(text, encoding="utf-8", newline="" if kind == "csv" else None)


class EvalSetBuilder:
    """10xgraph's fluent way to write an :class:`EvalSet`: ``EvalSetBuilder("weather")
    .add_case(query=..., expected=..., expected_tools=["get_weather"]).build()``.

    Cases without a ``case_id`` are numbered ``case_1``, ``case_2``, ... in the order added.
    Unlike 10xgraph, the set id is not a random UUID but derived from the name as
    :class:`EvalSet` derives it, so that a rebuilt set resumes the same runs.
    """

    def __init__(self, name: str = "eval_set") -> None:
        self.name = name
        self.eval_set_id = EvalSet(name=name).eval_set_id
        self.cases: list[EvalCase] = []

    def _next_id(self, case_id: str | None) -> str:
        return case_id or f"case_{len(self.cases) + 1}"

    def add_case(self, query: str, expected: str, case_id: str | None = None,
                 expected_tools: Sequence[str | ToolCall] | None = None,
                 expected_node_order: list[str] | None = None, name: str = "",
                 description: str = "") -> EvalSetBuilder:
        """A one-turn case; ``expected_tools`` are tool names or ToolCall objects."""
        self.cases.append(EvalCase.single_turn(
            eval_id=self._next_id(case_id), user_query=query, expected_response=expected,
            expected_tools=_tool_calls(expected_tools), expected_node_order=expected_node_order,
            name=name, description=description))
        return self

    def add_multi_turn(self, conversation: Sequence[tuple[str, str]], case_id: str | None = None,
                       expected_tools: Sequence[str | ToolCall] | None = None, name: str = "",
                       description: str = "") -> EvalSetBuilder:
        """A case of ``(user_query, expected_response)`` turns; the tools attach to the first."""
        self.cases.append(EvalCase.multi_turn(
            eval_id=self._next_id(case_id), conversation=list(conversation),
            expected_tools=_tool_calls(expected_tools), name=name, description=description))
        return self

    def add_tool_test(self, query: str, tool_name: str, tool_args: dict[str, Any] | None = None,
                      expected_response: str | None = None,
                      case_id: str | None = None) -> EvalSetBuilder:
        """A case about one tool call; without ``expected_response`` the expected answer is
        "Result from TOOL", as in 10xgraph."""
        self.cases.append(EvalCase.single_turn(
            eval_id=self._next_id(case_id), user_query=query,
            expected_response=expected_response or f"Result from {tool_name}",
            expected_tools=[ToolCall(name=tool_name, args=tool_args or {})]))
        return self

    def build(self) -> EvalSet:
        return EvalSet(eval_set_id=self.eval_set_id, name=self.name, eval_cases=list(self.cases))

    def save(self, path: str | Path) -> EvalSet:
        """Build, write to ``path`` (any format :meth:`EvalSet.save` knows) and return the set."""
        eval_set = self.build()
        eval_set.save(path)
        return eval_set

    @classmethod
    def from_conversations(cls, conversations: Iterable[dict[str, str]],
                           name: str = "conversation_tests") -> EvalSet:
        """One case per ``{"user": ..., "assistant": ...}`` exchange, ids ``conv_1``, ..."""
        builder = cls(name)
        for index, exchange in enumerate(conversations, start=1):
            builder.add_case(query=exchange.get("user", ""), expected=exchange.get("assistant", ""),
                             case_id=f"conv_{index}")
        return builder.build()

    @classmethod
    def from_file(cls, path: str | Path) -> EvalSetBuilder:
        """A builder holding the cases of a saved set, to add more."""
        eval_set = EvalSet.load(path)
        builder = cls(eval_set.name or "eval_set")
        builder.eval_set_id = eval_set.eval_set_id
        builder.cases = list(eval_set.eval_cases)
        return builder

    @classmethod
    def quick(cls, *pairs: tuple[str, str]) -> EvalSet:
        """A set named "quick_tests" from ``(query, expected)`` pairs, ids ``test_1``, ..."""
        builder = cls("quick_tests")
        for index, (query, expected) in enumerate(pairs, start=1):
            builder.add_case(query=query, expected=expected, case_id=f"test_{index}")
        return builder.build()


def create_simple_eval_set(eval_set_id: str,
                           cases: Iterable[tuple[str, str, str]]) -> EvalSet:
    """10xgraph's shortcut: a set named ``eval_set_id`` from ``(query, expected, name)``
    triples; ids ``case_0``, ``case_1``, ...; an empty name becomes "Case N"."""
    return EvalSet(eval_set_id=eval_set_id, name=eval_set_id, eval_cases=[
        EvalCase.single_turn(eval_id=f"case_{index}", user_query=query,
                             expected_response=expected, name=name or f"Case {index}")
        for index, (query, expected, name) in enumerate(cases)])


def _tool_calls(tools: Sequence[str | ToolCall] | None) -> list[ToolCall] | None:
    if not tools:
        return None
    return [ToolCall(name=t) if isinstance(t, str) else t for t in tools]


# Formats -----------------------------------------------------------------------------------


def _kind(path: Path) -> str:
    suffix = path.suffix.lower()
    kinds = {".json": "json", ".jsonl": "jsonl", ".yaml": "yaml", ".yml": "yaml", ".csv": "csv"}
    if suffix not in kinds:
        raise InputError(f"unsupported case file type {suffix or '(none)'!r}",
                         source=str(path), expected=_SUFFIXES)
    return kinds[suffix]


def _split_document(data: Any, source: str) -> tuple[dict[str, Any], list[Any], Loc]:
    """(EvalSet header fields, raw cases, path prefix of the cases) of a JSON/YAML document."""
    if data is None:
        raise InputError("empty document", source=source,
                         expected="an EvalSet object with 'eval_cases' or a list of cases")
    if adk.is_legacy(data):
        try:
            return {}, adk.from_legacy(data), ()
        except ValueError as exc:
            raise InputError(str(exc), source=source,
                             expected="ADK's legacy eval data ([{name, data: [{query, "
                                      "expected_tool_use, reference}]}])") from None
    if isinstance(data, list):
        return {}, data, ()
    if isinstance(data, dict):
        data = adk.read_set_header(data)
        accepted = EvalSet.accepted_names()
        data = {snake_case(k) if isinstance(k, str) and snake_case(k) in accepted else k: v
                for k, v in data.items()}
        unknown = [str(k) for k in data if k not in accepted]
        if unknown:
            close = nearest_name(unknown[0], accepted)
            hint = f" (did you mean {close!r}?)" if close else ""
            raise InputError(f"unknown key {unknown[0]!r}{hint}", source=source, field=unknown[0],
                             expected="one of " + ", ".join(accepted))
        key = "cases" if "cases" in data and "eval_cases" not in data else "eval_cases"
        cases = data.get(key)
        if not isinstance(cases, list):
            raise InputError("missing or not a list", source=source, field=key,
                             expected="a list of case objects")
        return data, cases, (key,)
    raise InputError(f"top level is {type(data).__name__}", source=source,
                     expected="an EvalSet object with 'eval_cases' or a list of cases")


def _read_jsonl(text: str, source: str) -> list[tuple[Any, int | None, Loc]]:
    return [(value, number, ()) for value, number in jsonl_values(text, source)]


def _read_csv(text: str, source: str) -> list[tuple[Any, int | None, Loc]]:
    return [(_csv_case(cells, source, line), line, ())
            for cells, line in csv_rows(text, source, _check_csv_header)]


def _check_csv_header(header: list[str], source: str) -> None:
    for column in header:
        if not column:
            raise InputError("empty column name in the header", source=source, line=1)
        if header.count(column) > 1:
            raise InputError(f"column {column!r} appears twice", source=source, line=1)
    if "input" not in header and "conversation" not in header:
        raise InputError("no 'input' column", source=source, line=1,
                         expected="a header with an 'input' (or 'conversation') column")
    for column in header:
        if column not in _CSV_COLUMNS and not (column.startswith(_CSV_METADATA_PREFIX)
                                               and len(column) > len(_CSV_METADATA_PREFIX)):
            close = nearest_name(column, _CSV_COLUMNS)
            hint = f" (did you mean {close!r}?)" if close else ""
            raise InputError(f"column {column!r} maps to no case field{hint}", source=source,
                             line=1, expected="one of " + ", ".join(_CSV_COLUMNS)
                             + f", or {_CSV_METADATA_PREFIX}KEY for a metadata entry")


def _csv_case(cells: dict[str, str], source: str, line: int) -> dict[str, Any]:
    def as_json(column: str, expected: str) -> Any:
        try:
            return json.loads(cells[column])
        except json.JSONDecodeError as exc:
            raise InputError(f"invalid JSON: {exc.msg}", source=source, line=line,
                             field=column, expected=expected) from None
        except ValueError as exc:
            raise beyond_python_limits(exc, source=source, text=cells[column],
                                       line=line) from None

    def as_list(column: str) -> list[Any]:
        value = cells[column].strip()
        if value.startswith("["):
            return as_json(column, "a JSON list")
        return [part.strip() for part in value.split(",") if part.strip()]

    case: dict[str, Any] = {}
    metadata: dict[str, Any] = {}
    media: list[ImagePart | DocumentPart] = []
    for column, value in cells.items():
        if column in _CSV_MEDIA_COLUMNS:
            media += _csv_media(column, value, source, line)
        elif column in ("input", "expected_output", "name", "description", "eval_id"):
            case[column] = value
        elif column == "context":
            case["context"] = value
            if value.lstrip().startswith("["):
                try:
                    case["context"] = json.loads(value)
                except ValueError:
                    pass  # a context that merely starts with "[" is plain text
        elif column == "tags":
            case["tags"] = as_list(column)
        elif column == "expected_tool_trajectory":
            calls = as_list(column)
            case[column] = [{"name": c} if isinstance(c, str) else c for c in calls]
        elif column == "expected_node_order":
            case[column] = as_list(column)
        elif column == "conversation":
            case["conversation"] = as_json(column, "a JSON list of turns")
        elif column == "metadata":
            metadata.update(_require_dict(as_json(column, "a JSON object"), source, line))
        else:  # metadata.KEY, the header check let nothing else through
            metadata[column.removeprefix(_CSV_METADATA_PREFIX)] = value
    if metadata:
        case["metadata"] = metadata
    if media:
        text = case.get("input")
        case["input"] = ([text] if text else []) + media
    return case


def _csv_media(column: str, cell: str, source: str, line: int) -> list[ImagePart | DocumentPart]:
    """The images or PDFs a media column's cell names, read relative to the CSV file."""
    kind = _CSV_MEDIA_COLUMNS[column]
    found = []
    for name in (n.strip() for n in cell.split(_CSV_MEDIA_SEPARATOR)):
        if not name:
            continue
        try:
            part = load_part({kind: name}, base_dir=Path(source).parent)
        except ContentError as exc:
            raise ContentError(str(exc), source=source, line=line, field=column) from None
        assert not isinstance(part, TextPart)  # a {image: ...} mapping reads as media
        found.append(part)
    return found


def _csv_media_name(part: ImagePart | DocumentPart, folder: Path) -> str:
    """How a CSV cell in ``folder`` names a part: the path it was read from when that path,
    read from ``folder``, is the same file (a set saved elsewhere would name files that are
    not there), else its bytes as a data: URL, or its URL."""
    if part.data is None or (part.path and _names_same_file(part, folder)):
        return part.path or part.as_data_url()
    return part.as_data_url()


def _names_same_file(part: ImagePart | DocumentPart, folder: Path) -> bool:
    target = Path(part.path or "").expanduser()
    try:
        return sha256_hex((folder / target).read_bytes()) == part.sha256
    except OSError:
        return False


def _require_dict(value: Any, source: str, line: int) -> dict[str, Any]:
    if not isinstance(value, dict):
        raise InputError(f"is a {type(value).__name__}", source=source, line=line,
                         field="metadata", expected="a JSON object")
    return value


def _write_csv(cases: Sequence[EvalCase], folder: Path) -> str:
    rows = []
    for case in cases:
        row: dict[str, str] = {"eval_id": case.eval_id, "input": case.input_text,
                               "expected_output": case.expected_output or ""}
        if isinstance(case.input, list):
            for column, kind in (("images", ImagePart), ("documents", DocumentPart)):
                names = [_csv_media_name(p, folder) for p in case.input if isinstance(p, kind)]
                if names:
                    row[column] = _CSV_MEDIA_SEPARATOR.join(names)
        if case.name:
            row["name"] = case.name
        if case.description:
            row["description"] = case.description
        if isinstance(case.context, list):
            row["context"] = json.dumps(case.context, ensure_ascii=False,
                                        default=lambda part: part.model_dump(mode="json"))
        elif case.context:
            row["context"] = case.context
        if case.tags:
            plain = all("," not in t and not t.startswith("[") for t in case.tags)
            row["tags"] = ", ".join(case.tags) if plain else json.dumps(case.tags, ensure_ascii=False)
        if case.metadata:
            row["metadata"] = json.dumps(case.metadata, ensure_ascii=False)
        # The expected images have no column of their own: the turns (JSON) hold them.
        if case.expected_media or not _is_shorthand(case, allow_expectations=False):
            if not case.expected_media and _is_shorthand(case, allow_expectations=True):
                turn = case.conversation[0]
                if turn.expected_tool_trajectory:
                    row["expected_tool_trajectory"] = json.dumps(
                        [c.model_dump(mode="json", exclude_defaults=True)
                         for c in turn.expected_tool_trajectory], ensure_ascii=False)
                if turn.expected_node_order:
                    row["expected_node_order"] = json.dumps(turn.expected_node_order,
                                                            ensure_ascii=False)
            else:
                row["conversation"] = json.dumps(
                    [t.model_dump(mode="json", exclude_defaults=True) for t in case.conversation],
                    ensure_ascii=False)
        rows.append(row)
    used = [c for c in _CSV_COLUMNS if c in ("input", "expected_output") or any(c in r for r in rows)]
    out = io.StringIO()
    writer = csv.DictWriter(out, fieldnames=used, lineterminator="\n")
    writer.writeheader()
    writer.writerows(rows)
    return out.getvalue()


# Cases -------------------------------------------------------------------------------------


def _is_shorthand(case: EvalCase, allow_expectations: bool) -> bool:
    """Whether the conversation is just the one turn that ``input``/``expected_output`` imply."""
    if len(case.conversation) != 1:
        return False
    turn = case.conversation[0]
    if turn.user_content != (case.input or "") or turn.expected_final_response != case.expected_output:
        return False
    if turn.expected_media != case.expected_media:
        return False
    if turn.invocation_id is not None:
        return False
    return allow_expectations or not (turn.expected_tool_trajectory or turn.expected_node_order)


def _case_dict(case: EvalCase) -> dict[str, Any]:
    data = case.model_dump(mode="json", exclude_defaults=True)
    data["eval_id"] = case.eval_id
    if case.session_input is not None:  # what was given, defaults included, as ADK wrote it
        data["session_input"] = case.session_input.model_dump(mode="json", exclude_unset=True)
    if _is_shorthand(case, allow_expectations=False):
        data.pop("conversation", None)
    return data


def _first_unknown(raw: dict[str, Any], model: type[StrictModel]) -> str | None:
    accepted = model.accepted_names()
    return next((str(k) for k in raw if k not in accepted and snake_case(str(k)) not in accepted),
                None)


def _unknown_key(raw: dict[str, Any]) -> tuple[Loc, str, type[StrictModel]] | None:
    """The first key that no model would read, with its location inside the case."""
    key = _first_unknown(raw, EvalCase)
    if key is not None:
        return (key,), "case", EvalCase
    conversation = raw.get("conversation")
    for t, turn in enumerate(conversation if isinstance(conversation, list) else []):
        if not isinstance(turn, dict):
            continue
        key = _first_unknown(turn, Invocation)
        if key is not None:
            return ("conversation", t, key), "turn", Invocation
        calls = turn.get("expected_tool_trajectory")
        for c, call in enumerate(calls if isinstance(calls, list) else []):
            if isinstance(call, dict):
                key = _first_unknown(call, ToolCall)
                if key is not None:
                    return ("conversation", t, "expected_tool_trajectory", c, key), "tool call", ToolCall
    return None


def _validate_case(raw: Any, source: str, line: int | None, prefix: Loc,
                   text: str | None) -> EvalCase:
    try:
        raw = surrogate_pairs_joined(raw)
    except LoneSurrogate as exc:
        where = (*prefix, *exc.loc)
        raise InputError(str(exc), source=source, line=line or _line_of(text, where),
                         field=_path(where) or None, expected=SURROGATE_EXPECTED) from None
    try:
        raw = adk.read_case_entry(raw)
    except adk.TurnProblem as exc:
        where = (*prefix, "conversation", exc.turn)
        raise InputError(str(exc), source=source, line=line or _line_of(text, where),
                         field=_path(where)) from None
    except ValueError as exc:
        raise InputError(str(exc), source=source, line=line or _line_of(text, prefix),
                         field=_path(prefix) or None) from None
    if isinstance(raw, dict):
        unknown = _unknown_key(raw)
        if unknown:
            loc, what, model = unknown
            close = nearest_name(loc[-1], model.accepted_names())
            hint = f" (did you mean {close!r}?)" if close else ""
            if what == "case":
                hint += " (put extra data under 'metadata')"
            raise InputError(f"unknown {what} field{hint}", source=source,
                             line=line or _line_of(text, (*prefix, *loc)),
                             field=_path((*prefix, *loc)),
                             expected="one of " + ", ".join(model.accepted_names()))
    if isinstance(raw, dict):
        raw = _read_media(raw, _Place(source, line, prefix, text))
    try:
        case = EvalCase.model_validate(raw)
    except ValidationError as exc:
        loc, message = _first_problem(exc)
        full = (*prefix, *loc)
        raise InputError(message, source=source, line=line or _line_of(text, full),
                         field=_path(full) or None) from None
    if case.input is None and not case.conversation and adk.scenario_of(case) is None:
        raise InputError("the case has nothing to ask", source=source,
                         line=line or _line_of(text, prefix), field=_path((*prefix, "input")),
                         expected="an 'input' or a 'conversation'")
    return case


@dataclass(frozen=True)
class _Place:
    """Where a case sits in its file: errors name it, and paths are read from its folder."""

    source: str
    line: int | None
    prefix: Loc
    text: str | None

    def error(self, exc: ContentError, loc: Loc) -> ContentError:
        where = (*self.prefix, *loc)
        return ContentError(str(exc), source=self.source,
                            line=self.line or _line_of(self.text, where), field=_path(where))


def _read_parts(value: Any, loc: Loc, place: _Place) -> Any:
    """A field given as parts, each read (an image path relative to the case file's folder);
    one that holds none is left as it is."""
    items = value if isinstance(value, list) else [value]
    base_dir = Path(place.source).parent
    parts = []
    for index, item in enumerate(items):
        if isinstance(item, str) or not (is_part(item) or isinstance(item, dict)):
            parts.append(item)
            continue
        try:
            parts.append(load_part(item, base_dir=base_dir))
        except ContentError as exc:
            raise place.error(exc, (*loc, index) if isinstance(value, list) else loc) from None
    return parts if isinstance(value, list) else parts[0]


def _read_media(raw: dict[str, Any], place: _Place) -> dict[str, Any]:
    """The case with its images and PDFs read: in ``input``, ``context``,
    ``expected_output`` and each turn's ``user_content`` and ``expected_final_response``
    (a Gemini/ADK Content's or a chat message's parts too)."""
    raw = dict(raw)
    for key in ("input", "context", "expected_output"):
        value = raw.get(key)
        if isinstance(value, list) or (isinstance(value, dict) and is_part(value)):
            raw[key] = _read_parts(value, (key,), place)
    conversation = raw.get("conversation")
    if isinstance(conversation, list):
        turns = []
        for number, turn in enumerate(conversation):
            if isinstance(turn, dict):
                turn = {key: _read_turn_media(value, ("conversation", number, key), place)
                        if key in ("user_content", "expected_final_response") else value
                        for key, value in turn.items()}
            turns.append(turn)
        raw["conversation"] = turns
    return raw


def _read_turn_media(value: Any, loc: Loc, place: _Place) -> Any:
    if holds_media(value):
        return _read_parts(value, loc, place)
    if isinstance(value, dict):
        key = "parts" if "parts" in value else "content" if "content" in value else None
        inner = value.get(key) if key else None
        if isinstance(inner, list) and holds_media(inner):
            return _read_parts(inner, (*loc, key), place)
    return value


def _first_problem(exc: ValidationError) -> tuple[Loc, str]:
    """The first error, with pydantic's union-member tags dropped and alternatives merged."""
    errors = exc.errors()
    unknown = unknown_field(errors[0])
    if unknown is not None:
        return (*_clean_loc(errors[0]["loc"]), unknown.field), unknown.detail
    loc = _clean_loc(errors[0]["loc"])
    messages = [_plain(e["msg"]) for e in errors if _clean_loc(e["loc"]) == loc]
    unique = list(dict.fromkeys(messages))
    prefix = "Input should be "
    if len(unique) > 1 and all(m.startswith(prefix) for m in unique):
        return loc, prefix + " or ".join(m[len(prefix):] for m in unique)
    return loc, unique[0]


def _clean_loc(loc: Loc) -> Loc:
    # Union branches appear in loc as type tags such as 'str' or 'list[str]'.
    tags = {"str", "int", "float", "bool", "none", "dict", "list"}
    return tuple(p for p in loc if isinstance(p, int)
                 or (p not in tags and re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", p)))


def _plain(message: str) -> str:
    return message.removeprefix("Value error, ")


def _path(loc: Loc) -> str:
    text = ""
    for part in loc:
        text += f"[{part}]" if isinstance(part, int) else (f".{part}" if text else str(part))
    return text


def _line_of(text: str | None, loc: Loc) -> int | None:
    """Line of the deepest node on ``loc`` in a JSON or YAML document (JSON parses as YAML)."""
    if text is None:
        return None
    try:
        node = yaml.compose(text)
    except yaml.YAMLError:
        return None
    line = None
    for part in loc:
        if node is None:
            break
        line = node.start_mark.line + 1
        if isinstance(node, yaml.MappingNode) and isinstance(part, str):
            node = next((v for k, v in node.value if k.value == part), None)
        elif isinstance(node, yaml.SequenceNode) and isinstance(part, int) and part < len(node.value):
            node = node.value[part]
        else:
            node = None
    if node is not None:
        line = node.start_mark.line + 1
    return line
