"""The judge bill and time of judging image cases (issue 34): referee against multivon-eval.

    python3 -m benchmarks.images                              # 40 cases, OpenAI and Anthropic wires
    python3 -m benchmarks.images --cases 8 --systems referee --json out.json

Every case is a question about one image from a small pool generated here, deterministically,
at realistic sizes (12 MP phone-photo JPEGs of 3.8 and 4.9 MB, 2560x1440 PNG screenshots,
512x512 images); cases share images, as a suite's do. Both systems run the same cases with
VQAFaithfulness and DocumentGrounding at their defaults, each in its own subprocess (the peer
in ``.bench-venv``), against one scripted judge on 127.0.0.1, twice with the same cache
directory: the second pass is what each system's reply cache saves.

Everything is counted at the server, from what arrived: requests, request bytes, the image
parts and their bytes, their size as decoded, and prompt tokens by each provider's documented
image rule (``referee.content._tokens``, the same function for both systems' images) plus
referee's 4-characters-a-token estimate for the text. The server refuses an image over
Anthropic's 5 MB per-image limit as Anthropic does (``referee.testing.media_limits``).
"""

from __future__ import annotations

import argparse
import base64
import hashlib
import io
import json
import os
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from benchmarks.peers import REPO_ROOT, ensure_peers
from benchmarks.systems.images_runner import MODELS

SYSTEMS = ("referee", "multivon-eval")
PROVIDERS = ("openai", "anthropic")
PASSES = 2


@dataclass(frozen=True)
class PoolImage:
    name: str
    width: int
    height: int
    kind: str      # photo (JPEG), screenshot (PNG) or small (PNG or JPEG)
    seed: int
    noise: float   # sensor noise of a photo: it decides how large the JPEG is


# Phone photos at a camera's full resolution: 3.8 MB (under Anthropic's 5 MB as base64) and
# 4.9 MB (6.6 MB as base64, over it); screenshots; small images.
POOL = (
    PoolImage("photo-street.jpg", 4032, 3024, "photo", 1, 6.0),
    PoolImage("photo-receipt.jpg", 4032, 3024, "photo", 2, 10.0),
    PoolImage("screen-dashboard.png", 2560, 1440, "screenshot", 3, 0.0),
    PoolImage("screen-form.png", 2560, 1440, "screenshot", 4, 0.0),
    PoolImage("icon-chart.png", 512, 512, "small", 5, 4.0),
    PoolImage("thumb-photo.jpg", 512, 512, "small", 6, 8.0),
)


def _render(spec: PoolImage, scale: float) -> bytes:
    import numpy as np
    from PIL import Image

    width, height = max(16, int(spec.width * scale)), max(16, int(spec.height * scale))
    rng = np.random.default_rng(spec.seed)
    if spec.kind == "screenshot":
        # Flat panels, a few coloured cards and rows of glyph-like dark specks: compresses as a
        # real UI capture does, far better than a photo.
        canvas = np.full((height, width, 3), 244, dtype=np.uint8)
        for _ in range(14):
            x, y = int(rng.integers(0, width - 40)), int(rng.integers(0, height - 40))
            w, h = int(rng.integers(40, width // 3)), int(rng.integers(30, height // 4))
            canvas[y:y + h, x:x + w] = rng.integers(90, 250, 3, dtype=np.uint8)
        for row in range(40, height - 20, 28):
            glyphs = rng.random((10, width)) < 0.18
            canvas[row:row + 10][glyphs] = 30
        return _encode(Image.fromarray(canvas), "PNG")
    # A photo: smooth random shapes, then per-pixel sensor noise.
    coarse = rng.integers(0, 256, (height // 64 + 2, width // 64 + 2, 3), dtype=np.uint8)
    smooth = np.asarray(Image.fromarray(coarse).resize((width, height),
                                                      Image.Resampling.BICUBIC), dtype=np.int16)
    grain = (rng.normal(0, spec.noise, (height, width, 1))
             + rng.normal(0, spec.noise / 2, (height, width, 3))).astype(np.int16)
    image = Image.fromarray(np.clip(smooth + grain, 0, 255).astype(np.uint8))
    return _encode(image, "PNG" if spec.name.endswith(".png") else "JPEG")


def _encode(image: Any, fmt: str) -> bytes:
    out = io.BytesIO()
    image.save(out, fmt, **({"quality": 90} if fmt == "JPEG" else {"optimize": False}))
    return out.getvalue()


def make_pool(folder: Path, scale: float = 1.0) -> list[Path]:
    """The pool's files in ``folder`` (made once; the same bytes every time)."""
    if scale != 1.0:
        folder = folder / f"scale-{scale:g}"
    folder.mkdir(parents=True, exist_ok=True)
    paths = []
    for spec in POOL:
        path = folder / spec.name
        if not path.exists():
            path.write_bytes(_render(spec, scale))
        paths.append(path)
    return paths


def _pixels(path: Path) -> tuple[int, int]:
    from PIL import Image

    with Image.open(path) as image:
        return image.size


def make_cases(count: int, pool: list[Path]) -> list[dict[str, str]]:
    """``count`` cases, each a distinct question and answer about one pool image (shared)."""
    return [{"input": f"Case {i}: what does {path.stem} show?",
             "output": f"Case {i}: it shows {i % 5 + 2} marked regions, a caption and a date.",
             "image_path": str(path.resolve())}
            for i, path in ((i, pool[i % len(pool)]) for i in range(count))]


def scripted_reply(prompt: str) -> str:
    """The answer each system's own vision prompt asks for, so every case is scored."""
    import re

    if "Q1:" in prompt:
        return "Q1: Yes\nQ2: Yes\nQ3: Yes"
    if "claims" in prompt and ("List at most 3" in prompt or "Extract up to 3" in prompt):
        case = re.search(r"Case (\d+)", prompt)
        n = case.group(1) if case else "?"
        return json.dumps([f"case {n} shows marked regions", f"case {n} has a caption",
                           f"case {n} shows a date"])
    return "Yes"


@dataclass
class Tally:
    """What arrived at the judge during one pass of one system."""

    requests: int = 0
    refused: int = 0
    request_bytes: int = 0
    image_parts: int = 0
    image_wire_bytes: int = 0      # the images as sent: base64 text in the JSON body
    image_tokens: int = 0          # of the requests answered (a refused one is not billed)
    text_tokens: int = 0
    output_tokens: int = 0
    largest_image: str = ""        # WxH of the largest image sent, in pixels
    distinct_images: set[str] = field(default_factory=set)

    @property
    def prompt_tokens(self) -> int:
        return self.image_tokens + self.text_tokens


class ImageMeter:
    """The scripted server's responder: measures each request, refuses an image over
    Anthropic's limit, answers after the latency, and drops the image text it has measured
    (a pass of the peer would otherwise hold gigabytes of request bodies)."""

    def __init__(self, latency_s: float) -> None:
        self.latency_s = latency_s
        self._lock = threading.Lock()
        self._sizes: dict[str, tuple[int, int]] = {}
        self.tally = Tally()
        self.failures: list[str] = []

    def begin(self) -> None:
        with self._lock:
            self.tally = Tally()

    def __call__(self, request: Any) -> Any:
        from referee.judge.prompt_caching import estimate_tokens
        from referee.testing.media_limits import oversized_image_refusal
        from referee.testing.script import Reply

        try:
            refusal = oversized_image_refusal(request)
            images, texts = _media_and_text(request.body, request.provider)
            measured = [self._measure(request, data, detail) for data, detail in images]
            reply = scripted_reply("\n".join(texts))
            with self._lock:
                t = self.tally
                t.requests += 1
                t.refused += refusal is not None
                t.request_bytes += int(request.headers.get("content-length") or 0)
                # A refused request is not billed: its tokens count nowhere.
                billed = refusal is None
                t.text_tokens += billed * sum(estimate_tokens(text) for text in texts)
                t.output_tokens += billed * estimate_tokens(reply)
                for digest, size, tokens, label in measured:
                    t.image_parts += 1
                    t.image_wire_bytes += size
                    t.image_tokens += billed * tokens
                    t.distinct_images.add(digest)
                    if _pixel_count(label) > _pixel_count(t.largest_image):
                        t.largest_image = label
            _drop_image_text(request.body)
        except Exception as exc:  # a broken meter must show in the table, not hang a system
            self.failures.append(f"{type(exc).__name__}: {exc}")
            raise
        return refusal if refusal is not None else Reply(text=reply, latency_s=self.latency_s)

    def _measure(self, request: Any, data: str, detail: str) -> tuple[str, int, int, str]:
        from PIL import Image

        from referee.content._tokens import anthropic_image_tokens, openai_image_tokens

        digest = hashlib.sha256(data.encode("ascii")).hexdigest()
        with self._lock:
            size = self._sizes.get(digest)
        if size is None:
            with Image.open(io.BytesIO(base64.b64decode(data))) as image:
                size = image.size
            with self._lock:
                self._sizes[digest] = size
        rule = anthropic_image_tokens if request.provider == "anthropic" else openai_image_tokens
        tokens = rule(request.model, size[0], size[1], detail)
        return digest, len(data), tokens, f"{size[0]}x{size[1]}"


def _pixel_count(size: str) -> int:
    width, _, height = size.partition("x")
    return int(width) * int(height) if height else 0


def _media_and_text(body: dict[str, Any], provider: str) -> tuple[list[tuple[str, str]], list[str]]:
    """(base64 data, detail) of each inline image, and the text parts, of a Chat Completions or
    Messages body."""
    images: list[tuple[str, str]] = []
    texts: list[str] = [body["system"]] if isinstance(body.get("system"), str) else []
    for message in body.get("messages") or []:
        content = message.get("content")
        if isinstance(content, str):
            texts.append(content)
            continue
        for block in content or []:
            kind = block.get("type")
            if kind == "text":
                texts.append(block.get("text", ""))
            elif kind == "image_url":
                url = block["image_url"]["url"]
                if url.startswith("data:"):
                    images.append((url.split(",", 1)[1], block["image_url"].get("detail", "auto")))
            elif kind == "image" and block.get("source", {}).get("type") == "base64":
                images.append((block["source"]["data"], "auto"))
    return images, texts


def _drop_image_text(body: dict[str, Any]) -> None:
    for message in body.get("messages") or []:
        for block in message.get("content") if isinstance(message.get("content"), list) else []:
            if block.get("type") == "image_url":
                block["image_url"]["url"] = "data:,measured"
            elif block.get("type") == "image" and isinstance(block.get("source"), dict):
                block["source"]["data"] = "measured"


@dataclass
class Row:
    provider: str
    system: str
    run_pass: int
    cases: int
    wall_s: float = 0.0
    cpu_s: float = 0.0
    evaluations: int = 0
    passed_evaluations: int = 0
    errored_evaluations: int = 0
    errored_cases: int = 0
    requests: int = 0
    refused: int = 0
    request_bytes: int = 0
    image_parts: int = 0
    image_wire_bytes: int = 0
    distinct_images: int = 0
    largest_image: str = ""
    image_tokens: int = 0
    prompt_tokens: int = 0
    output_tokens: int = 0
    cost_usd: float = 0.0
    notes: list[str] = field(default_factory=list)
    error: str | None = None

    def per_case(self, value: float) -> float:
        return value / max(self.cases, 1)


def fitted_pool(pool: list[Path], provider: str) -> dict[str, dict[str, Any]]:
    """What referee sends ``provider`` for each pool image, and the CPU milliseconds it spends
    fitting it (cold: once per distinct image and judge, as a run does)."""
    from referee.content import ImagePart
    from referee.content._fit import fit_part
    from referee.content._limits import ANTHROPIC_LIMITS, OPENAI_LIMITS

    limits = ANTHROPIC_LIMITS if provider == "anthropic" else OPENAI_LIMITS
    sent = {}
    for path in pool:
        part = ImagePart(data=path.read_bytes())
        start = time.process_time()
        fitted = fit_part(part, limits)
        spent_ms = (time.process_time() - start) * 1000
        assert isinstance(fitted, ImagePart) and fitted.data is not None
        sent[path.name] = {"sent": f"{fitted.width}x{fitted.height} {fitted.media_type}",
                           "bytes": len(fitted.data), "fit_cpu_ms": round(spent_ms, 1)}
    return sent


def run_system(system: str, provider: str, cases_file: Path, server: Any, meter: ImageMeter,
               python: str, work: Path, cases: int) -> list[Row]:
    from referee.judge.pricing import estimate_cost

    cache_dir = work / f"cache-{system}-{provider}"
    env = dict(os.environ)
    for key in ("OPENAI_API_KEY", "ANTHROPIC_API_KEY", "OPENAI_BASE_URL", "ANTHROPIC_BASE_URL"):
        env.pop(key, None)
    # The peer's vision calls take their key and (for Anthropic) endpoint from the environment.
    env.update(OPENAI_API_KEY="sk-loopback", ANTHROPIC_API_KEY="sk-loopback",
               ANTHROPIC_BASE_URL=server.base_url("anthropic"),
               PYTHONPATH=str(REPO_ROOT) + os.pathsep + env.get("PYTHONPATH", ""))
    rows = []
    for run_pass in range(1, PASSES + 1):
        row = Row(provider=provider, system=system, run_pass=run_pass, cases=cases)
        out = work / f"{system}-{provider}-{run_pass}.json"
        meter.begin()
        done = subprocess.run(
            [python, "-m", "benchmarks.systems.images_runner", "--system", system,
             "--cases-file", str(cases_file), "--provider", provider,
             "--base-url", server.base_url(provider), "--cache-dir", str(cache_dir),
             "--out", str(out)],
            cwd=REPO_ROOT, env=env, capture_output=True, text=True)
        tally = meter.tally
        if done.returncode != 0 or not out.exists():
            row.error = (done.stderr.strip().splitlines() or ["no output"])[-1][:300]
            rows.append(row)
            break
        result = json.loads(out.read_text())
        for name in ("wall_s", "cpu_s", "evaluations", "passed_evaluations",
                     "errored_evaluations", "errored_cases", "notes"):
            setattr(row, name, result[name])
        row.requests, row.refused = tally.requests, tally.refused
        row.request_bytes, row.image_parts = tally.request_bytes, tally.image_parts
        row.image_wire_bytes, row.image_tokens = tally.image_wire_bytes, tally.image_tokens
        row.distinct_images, row.largest_image = len(tally.distinct_images), tally.largest_image
        row.prompt_tokens, row.output_tokens = tally.prompt_tokens, tally.output_tokens
        row.cost_usd = estimate_cost(MODELS[provider], tally.prompt_tokens,
                                     tally.output_tokens) or 0.0
        rows.append(row)
    return rows


def run_benchmark(*, cases: int = 40, systems: tuple[str, ...] = SYSTEMS,
                  providers: tuple[str, ...] = PROVIDERS, latency_ms: float = 50.0,
                  pool_scale: float = 1.0, work: Path | None = None,
                  log: Any = print) -> tuple[list[Row], dict[str, Any]]:
    from referee.testing import ScriptedJudgeServer

    work = work or Path(tempfile.mkdtemp(prefix="referee-bench-images-"))
    pool = make_pool(work / "pool", pool_scale)
    cases_file = work / "cases.json"
    cases_file.write_text(json.dumps(make_cases(cases, pool)))
    pythons = {"referee": sys.executable}
    if "multivon-eval" in systems:
        pythons["multivon-eval"] = str(ensure_peers(["multivon-eval"], log=log))
    facts: dict[str, Any] = {
        "pool": {p.name: {"size": "x".join(map(str, _pixels(p))), "bytes": p.stat().st_size,
                          "base64_bytes": 4 * -(-p.stat().st_size // 3)} for p in pool},
        "referee_sends": {provider: fitted_pool(pool, provider) for provider in providers},
    }
    meter = ImageMeter(latency_ms / 1000)
    rows: list[Row] = []
    with ScriptedJudgeServer(meter) as server:
        for provider in providers:
            for system in systems:
                log(f"images: {system} on the {provider} wire, {cases} cases x {PASSES} passes")
                rows += run_system(system, provider, cases_file, server, meter,
                                   pythons[system], work, cases)
                server.reset_record()
    if meter.failures:
        facts["meter_failures"] = meter.failures[:5]
    return rows, facts


HEADER = ("| wire | system | pass | judge req/case | request MB/case | image parts/case "
          "| image MB/case | largest image sent | image tok/case | prompt tok/case "
          "| $ per 1k cases | wall s | CPU s | refused req | errored evals | passed/evals |")


def table(rows: list[Row]) -> str:
    lines = [HEADER, "|" + "---|" * 3 + "---:|" * 13]
    for r in rows:
        if r.error:
            lines.append(f"| {r.provider} | {r.system} | {r.run_pass} | FAILED: {r.error} |")
            continue
        mb = 1_000_000
        lines.append(
            f"| {r.provider} | {r.system} | {r.run_pass} | {r.per_case(r.requests):.2f} "
            f"| {r.per_case(r.request_bytes) / mb:.2f} | {r.per_case(r.image_parts):.2f} "
            f"| {r.per_case(r.image_wire_bytes) / mb:.2f} | {r.largest_image or '-'} "
            f"| {r.per_case(r.image_tokens):,.0f} | {r.per_case(r.prompt_tokens):,.0f} "
            f"| {r.per_case(r.cost_usd) * 1000:.2f} | {r.wall_s:.2f} | {r.cpu_s:.2f} "
            f"| {r.refused} | {r.errored_evaluations} | {r.passed_evaluations}/{r.evaluations} |")
    return "\n".join(lines)


def ratios(rows: list[Row]) -> str:
    """referee / multivon-eval per wire and pass, for the columns that differ."""
    lines = ["| wire | pass | requests | request bytes | image bytes | prompt tokens | wall | CPU |",
             "|---|---|---:|---:|---:|---:|---:|---:|"]
    index = {(r.provider, r.system, r.run_pass): r for r in rows if not r.error}

    def ratio(a: float, b: float) -> str:
        return f"{a / b:.3f}" if b else "-"

    for (provider, system, run_pass), ours in index.items():
        peer = index.get((provider, "multivon-eval", run_pass))
        if system != "referee" or peer is None:
            continue
        lines.append(f"| {provider} | {run_pass} | {ratio(ours.requests, peer.requests)} "
                     f"| {ratio(ours.request_bytes, peer.request_bytes)} "
                     f"| {ratio(ours.image_wire_bytes, peer.image_wire_bytes)} "
                     f"| {ratio(ours.prompt_tokens, peer.prompt_tokens)} "
                     f"| {ratio(ours.wall_s, peer.wall_s)} | {ratio(ours.cpu_s, peer.cpu_s)} |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--cases", type=int, default=40)
    parser.add_argument("--systems", default=",".join(SYSTEMS))
    parser.add_argument("--providers", default=",".join(PROVIDERS))
    parser.add_argument("--latency-ms", type=float, default=50.0)
    parser.add_argument("--json", help="write the rows and the pool's facts here")
    args = parser.parse_args(argv)
    systems = tuple(s for s in args.systems.split(",") if s)
    providers = tuple(p for p in args.providers.split(",") if p)
    for name, chosen, known in (("system", systems, SYSTEMS), ("provider", providers, PROVIDERS)):
        unknown = [c for c in chosen if c not in known]
        if unknown:
            parser.error(f"unknown {name} {unknown}; expected some of {list(known)}")
    rows, facts = run_benchmark(cases=args.cases, systems=systems, providers=providers,
                                latency_ms=args.latency_ms)
    print(table(rows))
    print()
    print(ratios(rows))
    print()
    print(json.dumps(facts, indent=1))
    for r in rows:
        for note in r.notes:
            print(f"{r.provider} {r.system} pass {r.run_pass}: {note}")
    if args.json:
        Path(args.json).write_text(json.dumps({"rows": [asdict(r) for r in rows],
                                               "facts": facts}, indent=1))


if __name__ == "__main__":
    main()
