"""A run whose outputs hold images stores each image once beside the run, by content hash, and
keeps cases.jsonl small; the stored cases read back with the hash, and the bytes with it."""

from __future__ import annotations

import json

from content_samples import picture

from referee import EvalCase, EvalSuite, ExecutionResult
from referee.content import BlobStore, ImageCheck, ImagePart, find_parts
from referee.report.store import load_run


def test_two_hundred_image_cases_keep_cases_jsonl_small_and_store_each_image_once(tmp_path):
    screenshots = [picture(640, 400, seed=seed) for seed in range(2)]
    suite = EvalSuite("screens").add_cases([EvalCase(input=f"screen {i}") for i in range(200)])
    suite.add_evaluators(ImageCheck(media_types=["image/png"]))

    def agent(prompt: str) -> ExecutionResult:
        index = int(prompt.split()[-1])
        return ExecutionResult(actual_response=f"captured {prompt}", metadata={
            "screenshot": ImagePart(data=screenshots[index % 2], path="shot.png")})

    report = suite.run(agent, verbose=False, runs_dir=tmp_path)
    assert report.passed == 200
    run_dir = next(p for p in tmp_path.iterdir() if p.is_dir())
    blobs = sorted(p for p in (run_dir / "blobs").rglob("*") if p.is_file())
    assert sorted(p.read_bytes() for p in blobs) == sorted(screenshots)
    lines = (run_dir / "cases.jsonl").read_text().splitlines()
    assert len(lines) == 200
    assert max(len(line) for line in lines) < 2_000 < min(len(s) for s in screenshots)
    stored = json.loads(lines[3])["execution"]["metadata"]["screenshot"]
    assert "data" not in stored and stored["path"] == "shot.png"

    again = load_run(run_dir)
    case = next(c for c in again.cases if c.case_input == "screen 3")
    (part,) = find_parts(case.execution)
    assert part.data is None and part.sha256 == ImagePart(data=screenshots[1]).sha256
    assert BlobStore(run_dir).restore(part).data == screenshots[1]


def test_a_mapping_that_only_looks_like_an_image_is_stored_as_it_is(tmp_path):
    suite = EvalSuite("lookalike").add_case(EvalCase(input="q"))

    def agent(prompt: str) -> ExecutionResult:
        return ExecutionResult(actual_response="a", metadata={
            "thing": {"type": "image", "data": "not base64 !!", "colour": "red"}})

    suite.run(agent, verbose=False, runs_dir=tmp_path)
    run_dir = next(p for p in tmp_path.iterdir() if p.is_dir())
    (line,) = (run_dir / "cases.jsonl").read_text().splitlines()
    assert json.loads(line)["execution"]["metadata"]["thing"] == {
        "type": "image", "data": "not base64 !!", "colour": "red"}
    assert not (run_dir / "blobs").exists()
