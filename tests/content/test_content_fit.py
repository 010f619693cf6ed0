"""Parts fitted to each provider's documented limits (the original kept), their token cost by
each provider's rule, the vision check, and the deterministic image checks."""

from __future__ import annotations

import io
import random

import pytest
from content_samples import pdf, picture
from PIL import Image

from referee.content import (
    ANTHROPIC_CONTENT,
    GEMINI_CONTENT,
    OPENAI_CONTENT,
    ContentError,
    DocumentPart,
    ImagePart,
    TextPart,
    extract_text,
    fit_part,
    image_problems,
    images_match,
    perceptual_hash,
    register_text_extractor,
    require_vision,
    takes_images,
)
from referee.content._checks import hash_distance
from referee.content._limits import ANTHROPIC_LIMITS, GEMINI_LIMITS, MB, OPENAI_LIMITS

RULES = {"openai": OPENAI_CONTENT, "anthropic": ANTHROPIC_CONTENT, "google": GEMINI_CONTENT}


def size_of(part: ImagePart) -> tuple[int, int]:
    assert part.data is not None
    with Image.open(io.BytesIO(part.data)) as image:
        return image.size


@pytest.mark.parametrize(("provider", "expected"), [
    ("openai", (1152, 768)),      # fitted within 2048x2048, then the short side to 768
    ("anthropic", (1313, 875)),   # long edge 1568, then about 1.15 megapixels
    ("google", (3000, 2000)),     # under Gemini's 3072 bound: sent as it is
])
def test_a_large_image_is_scaled_to_what_each_provider_looks_at(provider, expected):
    original = ImagePart(data=picture(3000, 2000), path="big.png")
    fitted = fit_part(original, RULES[provider].limits)
    assert isinstance(fitted, ImagePart)
    assert size_of(fitted) == expected == (fitted.width, fitted.height)
    if expected == (3000, 2000):
        assert fitted.sha256 == original.sha256 and fitted.original_sha256 is None
    else:
        assert fitted.original_sha256 == original.sha256 != fitted.sha256
        assert fitted.media_type == "image/png"  # a lossless original stays lossless
    assert original.data == picture(3000, 2000)  # the original is left as it was


def test_a_format_the_provider_does_not_take_is_re_encoded():
    bmp = ImagePart(data=picture(200, 100, fmt="BMP"))
    assert bmp.media_type == "image/bmp"
    for provider in ("openai", "anthropic", "google"):
        fitted = fit_part(bmp, RULES[provider].limits)
        assert isinstance(fitted, ImagePart)
        assert fitted.media_type == "image/png" and size_of(fitted) == (200, 100)


def test_an_animated_gif_goes_to_openai_as_its_first_frame():
    frames = [Image.open(io.BytesIO(picture(64, 64, seed=s))).convert("P") for s in (1, 2)]
    out = io.BytesIO()
    frames[0].save(out, format="GIF", save_all=True, append_images=frames[1:])
    gif = ImagePart(data=out.getvalue())
    fitted = fit_part(gif, OPENAI_LIMITS)
    assert isinstance(fitted, ImagePart) and fitted.media_type == "image/png"
    assert images_match(fitted, picture(64, 64, seed=1))[0]


def tight_anthropic(max_bytes):
    from dataclasses import replace

    return replace(ANTHROPIC_LIMITS, max_image_bytes=max_bytes)


def grainy_photo() -> bytes:
    base = Image.open(io.BytesIO(picture(1000, 800)))
    grain = Image.effect_noise((1000, 800), 20).convert("RGB")
    out = io.BytesIO()
    Image.blend(base, grain, 0.2).save(out, format="PNG")
    return out.getvalue()


def test_an_image_over_the_byte_limit_is_re_encoded_as_jpeg():
    original = ImagePart(data=grainy_photo())
    assert original.size is not None and original.size > 1_000_000
    fitted = fit_part(original, tight_anthropic(120_000))
    assert isinstance(fitted, ImagePart) and fitted.media_type == "image/jpeg"
    assert fitted.size is not None and fitted.size <= 120_000
    assert size_of(fitted) == (1000, 800) and images_match(fitted, original)[0]


def test_an_image_that_cannot_get_under_the_byte_limit_is_refused():
    noise = Image.frombytes("RGB", (1000, 800), random.Random(7).randbytes(1000 * 800 * 3))
    out = io.BytesIO()
    noise.save(out, format="PNG")
    with pytest.raises(ContentError, match=r"^image noise.png is [\d.]+ KB even as JPEG at "
                                           r"quality 50; Anthropic takes at most 39.1 KB$"):
        fit_part(ImagePart(data=out.getvalue(), path="noise.png"), tight_anthropic(40_000))


def test_a_small_image_within_limits_is_sent_unchanged():
    small = ImagePart(data=picture(300, 200, fmt="JPEG"))
    assert fit_part(small, ANTHROPIC_LIMITS).sha256 == small.sha256
    assert fit_part(TextPart(text="x"), OPENAI_LIMITS) == TextPart(text="x")


def test_a_pdf_is_counted_and_an_oversized_one_refused_in_one_line():
    document = DocumentPart(data=pdf(3), path="forms/claim.pdf")
    checked = fit_part(document, ANTHROPIC_LIMITS)
    assert isinstance(checked, DocumentPart) and checked.pages == 3
    long = DocumentPart(data=pdf(101), path="forms/manual.pdf")
    with pytest.raises(ContentError) as raised:
        fit_part(long, ANTHROPIC_LIMITS)
    assert str(raised.value) == ("document forms/manual.pdf has 101 pages; Anthropic takes "
                                 "PDFs up to 100 pages")
    assert fit_part(long, GEMINI_LIMITS).pages == 101  # Gemini reads up to 1000 pages


def test_a_pdf_over_the_byte_limit_is_refused_before_it_is_parsed():
    heavy = DocumentPart(data=b"%PDF-1.7\n" + b"0" * (21 * MB), path="scan.pdf")
    with pytest.raises(ContentError, match=r"^document scan.pdf is 21.0 MB; Gemini takes PDFs "
                                           r"up to 20.0 MB$"):
        fit_part(heavy, GEMINI_LIMITS)


def test_a_broken_pdf_or_image_is_named():
    with pytest.raises(ContentError, match="document bad.pdf is not a readable PDF"):
        fit_part(DocumentPart(data=b"%PDF-1.4 garbage", path="bad.pdf"), OPENAI_LIMITS)
    with pytest.raises(ContentError, match="image cut.png cannot be decoded"):
        fit_part(ImagePart(data=picture()[:60], path="cut.png"), OPENAI_LIMITS)


def test_an_unidentified_image_is_named_without_pillows_buffer_address():
    # A PNG signature over bytes Pillow cannot identify: Pillow's message names its buffer
    # ("<_io.BytesIO object at 0x...>"), which would differ run to run and tell nobody anything.
    broken = ImagePart(data=b"\x89PNG\r\n\x1a\n" + bytes(64), path="shots/broken.png")
    with pytest.raises(ContentError) as raised:
        fit_part(broken, GEMINI_LIMITS)
    assert str(raised.value) == "image shots/broken.png cannot be decoded: cannot identify " \
                                "image file"


def test_a_heic_photo_without_the_heif_plugin_says_which_plugin(monkeypatch):
    import sys

    monkeypatch.setitem(sys.modules, "pillow_heif", None)  # not installed
    photo = ImagePart(data=b"\x00\x00\x00\x18ftypheic" + bytes(64), path="photo.heic")
    for limits in (OPENAI_LIMITS, GEMINI_LIMITS):  # re-encoded for one, measured for both
        with pytest.raises(ContentError) as raised:
            fit_part(photo, limits)
        assert str(raised.value) == ("image photo.heic is HEIC/HEIF, which Pillow reads only "
                                     "with the pillow-heif plugin: pip install pillow-heif")


def test_a_url_only_image_goes_to_providers_that_fetch_and_is_refused_for_gemini():
    remote = ImagePart(url="https://example.com/a.png")
    assert fit_part(remote, OPENAI_LIMITS) is remote
    with pytest.raises(ContentError, match="Gemini takes images as bytes"):
        fit_part(remote, GEMINI_LIMITS)


@pytest.mark.parametrize(("provider", "model", "size", "detail", "tokens"), [
    ("openai", "gpt-4o", (1024, 1024), "high", 765),        # OpenAI's worked example
    ("openai", "gpt-4o", (2048, 4096), "high", 1105),       # scaled to 768x1536: 6 tiles
    ("openai", "gpt-4o", (4096, 8192), "low", 85),
    ("openai", "gpt-4.1-mini", (1024, 1024), "auto", 1659),  # 1024 patches x 1.62
    ("openai", "gpt-4.1-mini", (1800, 2400), "auto", 2353),  # 1056x1408: 1452 patches
    ("openai", "gpt-5", (512, 512), "high", 210),
    ("anthropic", "claude-sonnet-4-5", (1000, 1000), "auto", 1334),
    ("anthropic", "claude-sonnet-4-5", (3000, 2000), "auto", 1532),  # as fitted: 1313x875
    ("google", "gemini-2.5-flash", (384, 300), "auto", 258),
    ("google", "gemini-2.5-flash", (1600, 900), "auto", 258 * 3 * 2),
])
def test_image_tokens_follow_each_providers_rule(provider, model, size, detail, tokens):
    assert RULES[provider].image_tokens(model, *size, detail) == tokens


def test_document_tokens_per_page():
    four, two = DocumentPart(data=pdf(4), pages=4), DocumentPart(data=pdf(2), pages=2)
    assert GEMINI_CONTENT.media_tokens("gemini-2.5-flash", four) == 4 * 258
    assert ANTHROPIC_CONTENT.media_tokens("claude-sonnet-4-5", two) == 6000
    assert OPENAI_CONTENT.media_tokens("gpt-4.1", TextPart(text="x")) == 0


def test_a_text_only_judge_is_refused_before_the_run_in_one_line():
    parts = [TextPart(text="Is the chart right?"), ImagePart(data=picture())]
    assert not takes_images(OPENAI_CONTENT, "gpt-3.5-turbo")
    assert takes_images(OPENAI_CONTENT, "gpt-4.1")
    assert takes_images(ANTHROPIC_CONTENT, "claude-haiku-4-5")
    with pytest.raises(ContentError) as raised:
        require_vision(OPENAI_CONTENT, "gpt-3.5-turbo", parts)
    assert str(raised.value).startswith("judge openai/gpt-3.5-turbo takes text only, and this "
                                        "criterion judges images (expected a judge model "
                                        "with vision")
    require_vision(OPENAI_CONTENT, "gpt-3.5-turbo", parts[:1])  # text alone is fine
    require_vision(OPENAI_CONTENT, "my-local-llava", parts)
    with pytest.raises(ContentError):
        require_vision(OPENAI_CONTENT, "my-local-llava", parts, declared=False)


def test_the_perceptual_hash_sees_copies_as_equal_and_other_images_as_different():
    original = picture(640, 480, seed=3)
    out = io.BytesIO()
    Image.open(io.BytesIO(original)).resize((320, 240)).save(out, format="JPEG", quality=70)
    copy = ImagePart(data=out.getvalue())  # half the size, lossy
    other = picture(640, 480, seed=6)
    matched, distance = images_match(copy, original)
    assert matched and distance <= 4
    matched, distance = images_match(other, original)
    assert not matched and distance > 10
    assert hash_distance(perceptual_hash(original), perceptual_hash(original)) == 0


def test_image_size_and_format_checks_name_each_problem():
    shot = ImagePart(data=picture(800, 600, fmt="JPEG"))
    assert image_problems(shot, media_types=["image/jpeg"], max_width=1024) == []
    assert image_problems(shot, media_types=["image/png"], min_width=1024, max_height=500,
                          max_bytes=100) == [
        "format image/jpeg is not one of image/png", f"{shot.size} bytes is over 100",
        "width 800 px is under 1024 px", "height 600 px is over 500 px"]


def test_a_registered_text_extractor_reads_its_media_type(monkeypatch):
    from referee.content import _checks

    monkeypatch.setattr(_checks, "_EXTRACTORS", {})
    document = DocumentPart(data=pdf(1))
    assert extract_text(document) is None
    register_text_extractor("application/pdf", lambda data: f"{len(data)} bytes of PDF")
    assert extract_text(document) == f"{document.size} bytes of PDF"


def test_prepared_content_is_fitted_costed_and_keyed_by_bytes_never_by_path():
    from referee.content import prepare_content

    shot = picture(3000, 2000)
    here = [TextPart(text="Rate it"), ImagePart(data=shot, path="a/shot.png"),
            DocumentPart(data=pdf(2), path="a/form.pdf")]
    elsewhere = [TextPart(text="Rate it"), ImagePart(data=shot, path="b/other-name.png"),
                 DocumentPart(data=pdf(2), path="b/renamed.pdf")]
    first = prepare_content(ANTHROPIC_CONTENT, "chat", "claude-sonnet-4-5", here)
    second = prepare_content(ANTHROPIC_CONTENT, "chat", "claude-sonnet-4-5", elsewhere)
    assert first.cache_key == second.cache_key
    assert not any("shot.png" in key or "form.pdf" in key for key in first.cache_key)
    assert first.media_tokens == 1532 + 2 * 3000  # the fitted 1313x875 image + two pages
    assert first.content[1]["source"]["media_type"] == "image/png"
    fitted = first.parts[1]
    assert isinstance(fitted, ImagePart) and fitted.original_sha256 == here[1].sha256
    gemini = prepare_content(GEMINI_CONTENT, "chat", "gemini-2.5-flash", here)
    assert gemini.cache_key != first.cache_key  # Gemini gets the full-size image
    assert gemini.media_tokens == 4 * 3 * 258 + 2 * 258


def test_a_text_only_judge_is_refused_before_any_image_is_decoded():
    from referee.content import prepare_content

    broken = ImagePart(data=picture()[:60])  # would fail to decode if it were fitted
    with pytest.raises(ContentError, match="takes text only"):
        prepare_content(ANTHROPIC_CONTENT, "chat", "claude-3-5-haiku-latest", [broken])


def test_without_pillow_fitting_names_the_extra(monkeypatch):
    import sys

    monkeypatch.setitem(sys.modules, "PIL.Image", None)
    with pytest.raises(ContentError) as raised:
        fit_part(ImagePart(data=picture()), OPENAI_LIMITS)
    assert str(raised.value) == ("images and documents need Pillow: pip install "
                                 "'referee[images]'")


def test_a_stored_part_without_its_bytes_says_where_they_are():
    stored = ImagePart(sha256="ab" * 32, media_type="image/png", path="shot.png")
    with pytest.raises(ContentError, match=r"^shot.png has no bytes here: a stored part, kept "
                                           r"by its hash \(BlobStore\(run_dir\).restore"):
        fit_part(stored, ANTHROPIC_LIMITS)


def test_a_very_large_picture_is_fitted_without_pillows_bomb_warning(monkeypatch, recwarn):
    # Pillow warns past MAX_IMAGE_PIXELS (89 MP: a 12000x9000 scan) and refuses past twice
    # that; the limit is lowered here so that a small picture stands in for a huge one.
    monkeypatch.setattr(Image, "MAX_IMAGE_PIXELS", 300 * 200)
    fitted = fit_part(ImagePart(data=picture(400, 300), path="scan.png"), OPENAI_LIMITS)
    assert isinstance(fitted, ImagePart) and fitted.data is not None
    assert not [w for w in recwarn if issubclass(w.category, Image.DecompressionBombWarning)]
    monkeypatch.setattr(Image, "MAX_IMAGE_PIXELS", 400 * 300 // 3)
    with pytest.raises(ContentError, match=r"image huge.png cannot be decoded: Image size "
                                           r"\(120000 pixels\) exceeds limit"):
        fit_part(ImagePart(data=picture(400, 300, seed=5), path="huge.png"), OPENAI_LIMITS)


def test_a_damaged_pdf_is_one_error_without_pypdfs_stray_log_lines(caplog):
    import logging

    caplog.set_level(logging.WARNING)
    with pytest.raises(ContentError, match="document cut.pdf is not a readable PDF"):
        fit_part(DocumentPart(data=pdf(3)[:300], path="cut.pdf"), ANTHROPIC_LIMITS)
    assert not [r for r in caplog.records if r.name.startswith("pypdf")]
    # Outside a page count, pypdf's own warnings still reach the user's logging.
    logging.getLogger("pypdf._reader").warning("a warning of the user's own pypdf use")
    assert [r.getMessage() for r in caplog.records if r.name.startswith("pypdf")] == [
        "a warning of the user's own pypdf use"]
