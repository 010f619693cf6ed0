"""A tiny run of the image benchmark (referee only, small images) so it cannot rot, and its
meter's counts. Counts only, never timings."""

from __future__ import annotations

import base64
import io
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks.images import POOL, ImageMeter, make_cases, run_benchmark, table  # noqa: E402
from referee.testing import Fault, RecordedRequest, Reply  # noqa: E402

CASES = 4
# VQAFaithfulness: one claims request and one per claim (the script gives 3); DocumentGrounding: 1.
REQUESTS_PER_CASE = 1 + 3 + 1
EVALUATORS = 2


@pytest.fixture(scope="module")
def measured(tmp_path_factory):
    work = tmp_path_factory.mktemp("images-bench")
    return run_benchmark(cases=CASES, systems=("referee",), providers=("openai", "anthropic"),
                         latency_ms=1.0, pool_scale=0.25, work=work, log=lambda message: None)


def test_every_wire_and_pass_has_a_row_with_the_counts_the_cases_imply(measured):
    rows, _ = measured
    assert [(r.provider, r.system, r.run_pass) for r in rows] == [
        ("openai", "referee", 1), ("openai", "referee", 2),
        ("anthropic", "referee", 1), ("anthropic", "referee", 2)]
    for row in rows:
        assert row.error is None
        assert (row.evaluations, row.passed_evaluations, row.errored_evaluations) == (
            CASES * EVALUATORS, CASES * EVALUATORS, 0)
    for first in (rows[0], rows[2]):
        assert first.requests == CASES * REQUESTS_PER_CASE
        assert first.image_parts == first.requests  # each request shows the judge its one image
        assert first.distinct_images == CASES       # cases 0-3 use the pool's first four images
        assert first.refused == 0
        assert first.request_bytes > first.image_wire_bytes > 0
        assert first.prompt_tokens > first.image_tokens > 0
    for second in (rows[1], rows[3]):  # the reply cache answers the whole second pass
        assert (second.requests, second.image_parts, second.request_bytes) == (0, 0, 0)
    assert table(rows).count("\n") == len(rows) + 1


def test_the_facts_name_what_referee_sends_each_provider(measured):
    _, facts = measured
    assert set(facts["pool"]) == {spec.name for spec in POOL}
    for provider in ("openai", "anthropic"):
        assert set(facts["referee_sends"][provider]) == {spec.name for spec in POOL}


def test_cases_share_the_pool_images_in_turn():
    pool = [Path(f"/pool/{i}.png") for i in range(3)]
    cases = make_cases(7, pool)
    assert [Path(c["image_path"]).name for c in cases] == ["0.png", "1.png", "2.png"] * 2 + ["0.png"]
    assert len({c["input"] for c in cases}) == len({c["output"] for c in cases}) == 7


def _anthropic_request(data: str) -> RecordedRequest:
    body = {"model": "claude-haiku-4-5", "max_tokens": 20, "messages": [{"role": "user", "content": [
        {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": data}},
        {"type": "text", "text": "Does the image support this claim?\n\nClaim: case 3 has a caption"}]}]}
    return RecordedRequest(index=0, method="POST", path="/v1/messages", provider="anthropic",
                           api_style="messages", model="claude-haiku-4-5", prompt="", system=None,
                           temperature=None, max_tokens=20, body=body,
                           headers={"content-length": str(len(data) + 300)})


def _png(width: int, height: int, mode: str = "RGB", noise: bool = False) -> str:
    import numpy as np
    from PIL import Image

    channels = len(mode)
    pixels = (np.random.default_rng(0).integers(0, 256, (height, width, channels), dtype=np.uint8)
              if noise else np.zeros((height, width, channels), dtype=np.uint8))
    out = io.BytesIO()
    Image.fromarray(pixels, mode).save(out, "PNG")
    return base64.b64encode(out.getvalue()).decode("ascii")


def test_the_meter_counts_an_answered_image_request_by_anthropics_token_rule():
    meter = ImageMeter(latency_s=0.0)
    request = _anthropic_request(_png(750, 100))
    outcome = meter(request)
    assert isinstance(outcome, Reply) and outcome.text == "Yes"
    tally = meter.tally
    assert (tally.requests, tally.refused, tally.image_parts, tally.image_tokens) == (1, 0, 1, 100)
    assert tally.largest_image == "750x100"
    assert request.body["messages"][0]["content"][0]["source"]["data"] == "measured"  # memory freed


def test_the_meter_refuses_an_image_over_5_mb_of_base64_and_bills_it_nothing():
    meter = ImageMeter(latency_s=0.0)
    data = _png(1100, 1100, "RGBA", noise=True)  # about 4.8 MB of PNG, 6.5 MB as base64
    outcome = meter(_anthropic_request(data))
    assert isinstance(outcome, Fault) and outcome.status == 400
    tally = meter.tally
    assert (tally.requests, tally.refused, tally.image_parts) == (1, 1, 1)
    assert tally.image_wire_bytes == len(data)
    assert (tally.image_tokens, tally.text_tokens, tally.output_tokens) == (0, 0, 0)
