"""Labelled-case files (JSONL, CSV, YAML) and the public-set loaders, on small files written here
in each set's own format."""

from __future__ import annotations

import json
import textwrap

import pytest

from referee.calibrate import load_evouna, load_halueval, load_labels, load_summedits
from referee.calibrate._labels import LABEL_KEY, data_fingerprint
from referee.errors import InputError

ROOT_EXAMPLE = "examples/calibration/support_faithfulness.jsonl"


def write(tmp_path, name: str, text: str):
    path = tmp_path / name
    path.write_text(textwrap.dedent(text).lstrip(), encoding="utf-8")
    return path


def test_a_jsonl_row_keeps_line_separators_inside_its_strings(tmp_path):
    """`referee labels export` and the report's download write outputs as they are: U+2028 and
    U+0085 stay raw inside a JSON string and must not split the row."""
    odd = "Refunds\u2028within\x8530 days"
    path = tmp_path / "l.jsonl"
    path.write_text(json.dumps({"input": "q", "output": odd, "label": "pass"},
                               ensure_ascii=False) + "\n", encoding="utf-8")
    [row] = load_labels(path)
    assert row.output == odd


def test_jsonl_csv_and_yaml_read_the_same_rows(tmp_path):
    jsonl = write(tmp_path, "l.jsonl", """
        {"id": "a", "input": "q1", "context": ["c1", "c2"], "output": "o1", "label": "pass"}
        {"input": "q2", "expected_output": "e2", "output": "o2", "human_score": 0.3}
        """)
    csv = write(tmp_path, "l.csv", """
        id,input,context,expected_output,output,label,human_score,metadata.source
        a,q1,"[""c1"", ""c2""]",,o1,pass,,web
        ,q2,,e2,o2,,0.3,
        """)
    yaml_file = write(tmp_path, "l.yaml", """
        cases:
          - id: a
            input: q1
            context: [c1, c2]
            output: o1
            label: pass
          - input: q2
            expected_output: e2
            output: o2
            human_score: 0.3
        """)
    for path in (jsonl, csv, yaml_file):
        rows = load_labels(path)
        assert [r.passed for r in rows] == [True, False], path
        assert rows[0].case.eval_id == "a" and rows[0].case.context == ["c1", "c2"]
        assert rows[1].human_score == 0.3 and rows[1].case.expected_output == "e2"
        assert rows[1].source == f"{path}:{3 if path.suffix == '.csv' else (2 if path == jsonl else 7)}"
    assert load_labels(csv)[0].case.metadata == {"source": "web"}
    # The same rows from any format are the same data.
    assert data_fingerprint(load_labels(jsonl)) == data_fingerprint(load_labels(yaml_file))
    # A cut-off decides what a human score means.
    assert load_labels(jsonl, cutoff=0.25)[1].passed is True


def test_a_conversation_row_and_the_stored_label(tmp_path):
    path = write(tmp_path, "c.jsonl", json.dumps({
        "conversation": [{"user_content": "hi"}, {"user_content": "refund?"}],
        "output": "30 days", "label": "fail"}) + "\n")
    [row] = load_labels(path)
    assert row.case.input == "refund?" and len(row.case.conversation) == 2
    stored = row.labelled_case()
    assert stored.metadata[LABEL_KEY]["output"] == "30 days"
    assert stored.metadata[LABEL_KEY]["passed"] is False
    assert stored.eval_id == row.case.eval_id


def test_rows_that_differ_only_in_the_output_keep_their_own_ids(tmp_path):
    path = write(tmp_path, "d.jsonl", """
        {"input": "q", "context": "c", "output": "one", "label": "pass"}
        {"input": "q", "context": "c", "output": "two", "label": "fail"}
        """)
    one, two = load_labels(path)
    assert one.case.eval_id != two.case.eval_id


@pytest.mark.parametrize("name, text, where", [
    ("bad.jsonl", '{"input": "q", "output": "o"}\n', "bad.jsonl:1: field 'label': give exactly one"),
    ("bad.jsonl", '{"input": "q", "output": "o", "label": "maybe"}\n',
     "bad.jsonl:1: field 'label': 'maybe' is not a verdict"),
    ("bad.jsonl", '\n{"input": "q", "label": "pass"}\n', "bad.jsonl:2: field 'output': missing"),
    ("bad.jsonl", '{"input": "q", "output": "o", "label": "pass", "verdict": 1}\n',
     "bad.jsonl:1: field 'verdict': unknown field"),
    ("bad.jsonl", '{"input": "q", "output": "o", "human_score": 1.5}\n',
     "bad.jsonl:1: field 'human_score': 1.5 is not a number between 0 and 1"),
    ("bad.jsonl", '{"output": "o", "label": "pass"}\n', "bad.jsonl:1: field 'input': missing"),
    ("bad.jsonl", '{"input": "q", "output": "o", "label": "pass"}\n{oops\n',
     "bad.jsonl:2: invalid JSON"),
    ("bad.csv", "input,output,label,grade\nq,o,pass,A\n", "bad.csv:1: unknown column 'grade'"),
    ("bad.csv", "input,output,label\nq,o,pass\nq2,o2,nope\n",
     "bad.csv:3: field 'label': 'nope' is not a verdict"),
    ("bad.yaml", "- input: q\n  output: o\n  label: pass\n- input: q2\n  output: [1]\n  label: fail\n",
     "bad.yaml:4: field 'output': is a list"),
    ("bad.txt", "x", "bad.txt: unsupported labels file type '.txt'"),
    ("empty.jsonl", "\n", "empty.jsonl: no labelled rows"),
    # These gave a bare ValueError, RecursionError or codec error naming no file.
    pytest.param("long.jsonl", '{"input": "q", "output": "o", "label": "pass"}\n'
     '{"input": "q", "output": "o", "label": "pass", "metadata": {"n": ' + "9" * 5000 + "}}\n",
     "long.jsonl:2: a number longer than 4300 digits", id='long-jsonl'),
    pytest.param("long.csv",
                 'input,output,label,metadata\nq,o,pass,"{""n"": ' + "9" * 5000 + '}"\n',
                 "long.csv:2: a number longer than 4300 digits", id='long-csv'),
    pytest.param("long.yaml",
                 "- {input: q, output: o, label: pass, metadata: {n: " + "9" * 5000 + "}}\n",
                 "long.yaml:1: a number longer than 4300 digits", id='long-yaml'),
    pytest.param("alias.yaml", "- {input: q, output: o, label: pass, metadata: &m {a: *m}}\n",
     "alias.yaml:1: nested too deeply to read", id='alias-yaml'),
    # A repeated key kept its last value only: a human verdict was lost in silence.
    pytest.param("twice.jsonl", '{"input": "q", "output": "o", "label": "pass", "label": "fail"}\n',
                 "twice.jsonl:1: key 'label' appears twice", id="twice-jsonl"),
    pytest.param("twice.yaml", "- input: q\n  output: o\n  label: pass\n  label: fail\n",
                 "twice.yaml:4: invalid YAML: key 'label' appears twice", id="twice-yaml"),
    pytest.param("lone.jsonl", '{"input": "q", "output": "half \\ud83d", "label": "pass"}\n',
     "lone.jsonl:1: field 'output': text holds a lone surrogate '\\ud83d'", id='lone-jsonl'),
    pytest.param("lone.csv",
                 'input,output,label,conversation\nq,o,pass,"[{""user_content"": ""\\udc00""}]"\n',
                 "lone.csv:2: field 'conversation.0.user_content': text holds a lone surrogate",
                 id='lone-csv'),
])


def test_bad_rows_name_the_file_line_and_field(tmp_path, name, text, where):
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    with pytest.raises(InputError) as caught:
        load_labels(path)
    message = str(caught.value)
    assert message.startswith(str(tmp_path / where.split(":")[0])), message
    assert where.split(" ", 1)[0].split("/")[-1] in message and where.split(": ", 1)[1] in message
    assert "\n" not in message


def test_the_example_set_loads():
    rows = load_labels(ROOT_EXAMPLE)
    assert 30 <= len(rows) <= 60
    assert {r.passed for r in rows} == {True, False}
    assert all(r.case.context_chunks for r in rows)


# Public sets, in their own formats -------------------------------------------------------------

def test_summedits_maps_document_summary_and_label(tmp_path):
    records = [
        {"id": "news_1_og", "doc": "The mill closed in 1998.", "summary": "The mill closed in 1998.",
         "label": 1, "original_summary": "The mill closed in 1998.", "edit_types": []},
        {"id": "news_1_0", "doc": "The mill closed in 1998.", "summary": "The mill closed in 1989.",
         "label": 0, "original_summary": "The mill closed in 1998.",
         "edit_types": ["entity_modification"]},
    ]
    path = tmp_path / "summedits_news.json"
    path.write_text(json.dumps(records), encoding="utf-8")
    rows = load_summedits(path)
    assert [(r.case.eval_id, r.passed, r.output) for r in rows] == [
        ("news_1_og", True, "The mill closed in 1998."), ("news_1_0", False, "The mill closed in 1989.")]
    assert rows[1].case.context == "The mill closed in 1998."
    assert rows[1].case.metadata["edit_types"] == ["entity_modification"]
    records[1]["label"] = 2
    path.write_text(json.dumps(records, indent=1), encoding="utf-8")
    with pytest.raises(InputError, match=r"summedits_news.json:\d+: field '\[1\]\.label': 2 is not 0 or 1"):
        load_summedits(path)


def test_halueval_gives_a_right_and_a_hallucinated_row_per_record(tmp_path):
    lines = [
        {"knowledge": "Paris is the capital of France.", "question": "Capital of France?",
         "right_answer": "Paris", "hallucinated_answer": "Lyon"},
        {"knowledge": "Bob likes jazz.", "dialogue_history": "[Human]: What does Bob like?",
         "right_response": "Jazz.", "hallucinated_response": "Bob likes jazz and rap."},
        {"document": "Rain fell all day in Leeds.", "right_summary": "It rained in Leeds.",
         "hallucinated_summary": "It snowed in Leeds."},
    ]
    path = tmp_path / "qa_data.json"
    path.write_text("\n".join(json.dumps(x) for x in lines) + "\n", encoding="utf-8")
    rows = load_halueval(path)
    assert [(r.output, r.passed) for r in rows] == [
        ("Paris", True), ("Lyon", False), ("Jazz.", True), ("Bob likes jazz and rap.", False),
        ("It rained in Leeds.", True), ("It snowed in Leeds.", False)]
    assert rows[0].case.input == "Capital of France?"
    assert rows[0].case.context == "Paris is the capital of France."
    assert rows[2].case.input == "[Human]: What does Bob like?"
    assert rows[4].case.context == "Rain fell all day in Leeds."
    path.write_text(json.dumps({"ID": "1", "user_query": "q", "chatgpt_response": "r",
                                "hallucination_label": "no"}) + "\n", encoding="utf-8")
    with pytest.raises(InputError, match=r"qa_data.json:1: field 'user_query': HaluEval's general set"):
        load_halueval(path)
    path.write_text(json.dumps({"knowledge": "k", "question": "q", "right_answer": "a"}) + "\n")
    with pytest.raises(InputError, match=r"qa_data.json:1: field 'hallucinated_answer': missing"):
        load_halueval(path)


def test_evouna_gives_one_row_per_judged_answer(tmp_path):
    records = [
        {"question": "who wrote hamlet", "golden_answer": "William Shakespeare/Shakespeare",
         "answer_fid": "Shakespeare", "judge_fid": True,
         "answer_gpt35": "Hamlet was written by Marlowe.", "judge_gpt35": False,
         "answer_chatgpt": "It was Shakespeare.", "judge_chatgpt": None,
         "answer_gpt4": "William Shakespeare wrote Hamlet.", "judge_gpt4": True,
         "answer_newbing": None, "judge_newbing": None, "improper": False},
        {"question": "when is the next film out", "golden_answer": "May 2018",
         "answer_fid": "2018", "judge_fid": True, "answer_gpt35": "x", "judge_gpt35": False,
         "answer_chatgpt": "x", "judge_chatgpt": False, "answer_gpt4": "x", "judge_gpt4": False,
         "answer_newbing": None, "judge_newbing": None, "improper": True},
    ]
    path = tmp_path / "NQ.json"
    path.write_text(json.dumps(records, indent=1), encoding="utf-8")
    rows = load_evouna(path)
    assert [(r.case.metadata["system"], r.passed) for r in rows] == [
        ("fid", True), ("gpt35", False), ("gpt4", True)]
    assert rows[0].case.input == "who wrote hamlet"
    assert rows[0].case.expected_output == "William Shakespeare (also accepted: Shakespeare)"
    assert len(load_evouna(path, include_improper=True)) == 7
    assert [r.case.metadata["system"] for r in load_evouna(path, systems=["gpt4"])] == ["gpt4"]
    records[0]["judge_fid"] = "yes"
    path.write_text(json.dumps(records, indent=1), encoding="utf-8")
    with pytest.raises(InputError, match=r"NQ.json:2: field '\[0\]\.judge_fid': 'yes' is not true"):
        load_evouna(path)


def test_a_repeated_id_names_both_lines(tmp_path):
    path = write(tmp_path, "dup.jsonl", """
        {"id": "a", "input": "q", "output": "o1", "label": "pass"}
        {"id": "b", "input": "q", "output": "o2", "label": "pass"}
        {"id": "a", "input": "q", "output": "o3", "label": "fail"}
        """)
    with pytest.raises(InputError, match=r"dup.jsonl:3: field 'id': repeats id 'a' first used on "
                                         r"line 1"):
        load_labels(path)


def test_a_labels_file_with_a_byte_order_mark_reads_as_case_files_do(tmp_path):
    # Spreadsheets save CSV with a BOM; it made the first column "\ufeffinput", unknown.
    for name, text in (("bom.csv", "input,output,label\nq,o,pass\n"),
                       ("bom.jsonl", '{"input": "q", "output": "o", "label": "pass"}\n')):
        path = tmp_path / name
        path.write_bytes(b"\xef\xbb\xbf" + text.encode())
        (row,) = load_labels(path)
        assert (row.case.input, row.output, row.passed) == ("q", "o", True)


def test_public_sets_name_the_record_of_a_lone_surrogate_or_an_overlong_number(tmp_path):
    # Each gave a codec error or a bare ValueError naming no file.
    cases = [
        (load_summedits, "se.json", '[{"doc": "d \\ud800", "summary": "s", "label": 1}]',
         "se.json: field '[0].doc': text holds a lone surrogate '\\ud800'"),
        (load_summedits, "long.json", '[{"doc": "d", "summary": "s",\n "label": '
         + "1" * 5000 + "}]", "long.json:2: a number longer than 4300 digits"),
        (load_halueval, "he.jsonl", '{"question": "q", "knowledge": "k", "right_answer": "r",'
         ' "hallucinated_answer": "h"}\n{"question": "q", "knowledge": "k \\udc00",'
         ' "right_answer": "r", "hallucinated_answer": "h"}\n',
         "he.jsonl:2: field 'knowledge': text holds a lone surrogate '\\udc00'"),
    ]
    for load, name, text, expected in cases:
        path = tmp_path / name
        path.write_text(text, encoding="utf-8")
        with pytest.raises(InputError) as caught:
            load(path)
        assert str(caught.value).startswith(f"{tmp_path / expected.split(':')[0]}")
        assert expected.split("/")[-1] in str(caught.value), str(caught.value)
