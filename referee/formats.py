"""Reading the files people write cases in: JSON, JSONL, YAML and CSV text, with every fault a
one-line :class:`~referee.errors.InputError` naming the file, the line and, where there is one,
the field. Case files (``referee.evalset``) and calibration labels (``referee.calibrate``) both
read through here; each checks its own fields.
"""

from __future__ import annotations

import csv
import io
import json
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import yaml

from referee.errors import InputError, beyond_python_limits


def read_text(path: Path) -> str:
    """The file's text; a missing, unreadable or non-UTF-8 file is an InputError naming it."""
    try:
        return path.read_text(encoding="utf-8-sig")  # spreadsheets save CSV with a BOM
    except FileNotFoundError:
        raise InputError("file not found", source=str(path)) from None
    except UnicodeDecodeError as exc:
        raise InputError(f"not UTF-8 text ({exc.reason} at byte {exc.start})",
                         source=str(path)) from None
    except OSError as exc:
        raise InputError(f"cannot read file: {exc.strerror}", source=str(path)) from None


class _DuplicateKey(ValueError):
    pass


def _unique_keys(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    # json keeps the last of two equal keys; the first (an expectation, say) would be lost.
    data: dict[str, Any] = {}
    for key, value in pairs:
        if key in data:
            raise _DuplicateKey(key)
        data[key] = value
    return data


class NoRepeatedKeysLoader(yaml.SafeLoader):
    """PyYAML's safe loader, but a key repeated in one mapping is an error, not a loss."""

    def construct_mapping(self, node: yaml.MappingNode, deep: bool = False) -> dict[Any, Any]:
        # By resolved tag and text: 1 and "1" (an int and a str) are two keys, as is ~ and "~".
        seen: set[tuple[str, str]] = set()
        for key_node, _ in node.value:
            if isinstance(key_node, yaml.ScalarNode) and key_node.tag != "tag:yaml.org,2002:merge":
                key = (key_node.tag, key_node.value)
                if key in seen:
                    raise yaml.constructor.ConstructorError(
                        None, None, f"key {key_node.value!r} appears twice in one mapping; "
                        "the first value would be lost", key_node.start_mark)
                seen.add(key)
        return super().construct_mapping(node, deep=deep)


def parse_json(text: str, source: str, line: int | None = None) -> Any:
    """A JSON document, or (``line`` given) one line of a JSONL file; what cannot be read
    whole (bad syntax, a repeated key, an over-long number) is an InputError naming the line."""
    try:
        return json.loads(text, object_pairs_hook=_unique_keys)
    except json.JSONDecodeError as exc:
        raise InputError(f"invalid JSON: {exc.msg} (column {exc.colno})", source=source,
                         line=line or exc.lineno) from None
    except _DuplicateKey as exc:
        if line is None:  # JSON is YAML: the YAML reader finds the line of the repeat
            try:
                yaml.load(text, Loader=NoRepeatedKeysLoader)  # noqa: S506 - a SafeLoader subclass
            except yaml.MarkedYAMLError as located:
                line = located.problem_mark.line + 1 if located.problem_mark else None
            except (yaml.YAMLError, ValueError, RecursionError):
                pass
        raise InputError(f"key {exc.args[0]!r} appears twice in one object; the first value "
                         "would be lost", source=source, line=line) from None
    except (ValueError, RecursionError) as exc:
        raise beyond_python_limits(exc, source=source, text=text, line=line) from None


def parse_yaml(text: str, source: str) -> Any:
    """A YAML document, read as :func:`parse_json` reads JSON."""
    try:
        return yaml.load(text, Loader=NoRepeatedKeysLoader)  # noqa: S506 - a SafeLoader subclass
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        problem = exc.problem or exc.context or "malformed YAML"
        raise InputError(f"invalid YAML: {problem}", source=source,
                         line=mark.line + 1 if mark else None) from None
    except yaml.YAMLError as exc:
        raise InputError(f"invalid YAML: {exc}", source=source) from None
    except (ValueError, RecursionError) as exc:  # PyYAML's int() of an over-long number
        raise beyond_python_limits(exc, source=source, text=text) from None


def jsonl_lines(text: str) -> Iterator[tuple[int, str]]:
    """(line number, line) of a JSONL text, blank lines left out. Lines end at "\\n" only:
    str.splitlines() would also cut at U+2028, U+0085 and the like, which JSON writers
    (``ensure_ascii=False``, a browser's JSON.stringify) leave unescaped inside strings."""
    for number, line in enumerate(text.split("\n"), start=1):
        line = line.removesuffix("\r")
        if line.strip():
            yield number, line


def jsonl_values(text: str, source: str) -> list[tuple[Any, int]]:
    """Each non-blank line's JSON value with its line number."""
    return [(parse_json(line, source, number), number) for number, line in jsonl_lines(text)]


def csv_rows(text: str, source: str,
             check_header: Callable[[list[str], str], None]) -> Iterator[tuple[dict[str, str], int]]:
    """Each non-blank row as {column: cell} (blank cells left out) with its line number, row by
    row, so the first fault in the file is the one reported, whoever finds it.

    ``check_header`` gets the stripped header row and raises for columns its reader does not
    take; a row with more cells than the header names, or an unclosed quote, is an error here.
    """
    # strict: an unclosed quote must be an error, not a cell that swallows the rest of the file.
    reader = csv.reader(io.StringIO(text, newline=""), strict=True)
    try:
        header = next(reader, None)
        if header is None:
            raise InputError("empty file", source=source, expected="a header row naming columns")
        header = [h.strip() for h in header]
        check_header(header, source)
        start = reader.line_num + 1
        for row in reader:
            line = start
            start = reader.line_num + 1
            if not any(cell.strip() for cell in row):
                continue
            if len(row) > len(header):
                raise InputError(f"{len(row)} cells but the header names {len(header)} columns",
                                 source=source, line=line)
            yield {h: v for h, v in zip(header, row) if v.strip()}, line
    except csv.Error as exc:
        raise InputError(f"malformed CSV: {exc}", source=source, line=reader.line_num) from None
