"""Content parts: read from case-file values and provider shapes, hashed by their bytes, stored
once in a run's blob store, and refused in one line when they cannot be read."""

from __future__ import annotations

import base64
import json
import subprocess
import sys

import pytest
from content_samples import pdf, picture

from referee.content import (
    BlobStore,
    ContentError,
    DocumentPart,
    ImagePart,
    TextPart,
    is_part,
    load_part,
    load_parts,
    parts_key,
)
from referee.content._media import parse_data_url


def b64(data: bytes) -> str:
    return base64.b64encode(data).decode("ascii")


def test_a_path_is_read_relative_to_the_case_file_and_keyed_by_its_bytes(tmp_path):
    (tmp_path / "img").mkdir()
    png = picture()
    (tmp_path / "img" / "chart.png").write_bytes(png)
    part = load_part({"type": "image", "path": "img/chart.png"}, base_dir=tmp_path)
    assert isinstance(part, ImagePart)
    assert part.data == png and part.media_type == "image/png"
    assert part.path == "img/chart.png"
    # The same bytes from elsewhere (a data URL) are the same part for every key.
    again = load_part({"image": f"data:image/png;base64,{b64(png)}"})
    assert again.sha256 == part.sha256
    assert parts_key([part]) == parts_key([again])
    assert "chart.png" not in json.dumps(parts_key([part]))


def test_the_bytes_decide_the_media_type_not_the_declared_one(tmp_path):
    jpeg = picture(fmt="JPEG")
    (tmp_path / "photo.png").write_bytes(jpeg)  # a JPEG with the wrong extension
    part = load_part({"image": "photo.png", "media_type": "image/png"}, base_dir=tmp_path)
    assert part.media_type == "image/jpeg"


def test_shorthands_and_provider_shapes_read_into_the_one_model(tmp_path):
    png, document = picture(), pdf(2)
    (tmp_path / "form.pdf").write_bytes(document)
    shapes = [
        {"type": "image_url", "image_url": {"url": f"data:image/png;base64,{b64(png)}"}},
        {"type": "input_image", "image_url": f"data:image/png;base64,{b64(png)}"},
        {"type": "image", "source": {"type": "base64", "media_type": "image/png",
                                     "data": b64(png)}},
        {"inline_data": {"mime_type": "image/png", "data": b64(png)}},
        {"inlineData": {"mimeType": "image/png", "data": b64(png)}},
    ]
    hashes = {load_part(shape).sha256 for shape in shapes}
    assert hashes == {load_part({"image": f"data:image/png;base64,{b64(png)}"}).sha256}
    docs = [load_part({"pdf": "form.pdf"}, base_dir=tmp_path),
            load_part({"path": "form.pdf"}, base_dir=tmp_path),
            load_part({"type": "file", "file": {"filename": "form.pdf",
                                                "file_data": f"data:application/pdf;base64,"
                                                             f"{b64(document)}"}}),
            load_part({"type": "document", "source": {"type": "base64",
                                                      "media_type": "application/pdf",
                                                      "data": b64(document)}})]
    assert all(isinstance(d, DocumentPart) for d in docs)
    assert len({d.sha256 for d in docs}) == 1
    assert docs[0].filename == "form.pdf"
    assert load_part({"type": "input_text", "text": "hi"}) == TextPart(text="hi")
    assert load_parts(["look:", {"image": f"data:image/png;base64,{b64(png)}"}])[0].text == "look:"
    assert all(is_part(shape) for shape in shapes) and not is_part({"text": "x"})


def test_a_remote_url_is_kept_as_a_reference_never_fetched():
    part = load_part({"image": "https://example.com/cat.jpg?size=large"})
    assert part.data is None and part.url == "https://example.com/cat.jpg?size=large"
    assert part.media_type == "image/jpeg"
    assert part.content_key() == "url:https://example.com/cat.jpg?size=large"


def test_parts_round_trip_through_json_as_base64():
    part = ImagePart(data=picture(), path="a.png")
    text = part.model_dump_json()
    assert json.loads(text)["data"] == b64(part.data)
    assert ImagePart.model_validate_json(text) == part


@pytest.mark.parametrize(("value", "expected"), [
    ({"type": "image", "path": "missing.png"},
     "cases.yaml: field 'input[1]': image file not found: missing.png"),
    ({"image": "data:image/svg+xml;base64,PHN2Zy8+"},
     "cases.yaml: field 'input[1]': image part: unsupported image media type image/svg+xml"),
    ({"type": "document", "url": "data:application/pdf;base64,%%%"},
     "cases.yaml: field 'input[1]': document part: the data URL's base64 payload does not "
     "decode"),
    ({"type": "video", "url": "x"}, "cases.yaml: field 'input[1]': unknown content part type "
                                    "'video' (expected text, image or document)"),
    (42, "cases.yaml: field 'input[1]': a content part is text or a mapping, not int"),
])
def test_bad_parts_are_refused_in_one_line_naming_the_file_and_field(tmp_path, value,
                                                                    expected):
    with pytest.raises(ContentError) as raised:
        load_parts(["see:", value], base_dir=tmp_path, source="cases.yaml", field="input")
    message = str(raised.value)
    assert "\n" not in message
    assert message.startswith(expected), message


def test_a_pdf_given_as_an_image_is_refused_by_its_bytes():
    with pytest.raises(ContentError, match="unsupported image media type application/pdf"):
        load_part({"image": f"data:image/png;base64,{b64(pdf())}"})


def test_data_urls_without_base64_are_percent_decoded():
    assert parse_data_url("data:text/plain,a%20b") == ("text/plain", b"a b")


def test_two_hundred_cases_store_their_image_once_and_keep_their_lines_small(tmp_path):
    store = BlobStore(tmp_path / "run")
    screenshot = picture(1280, 800)
    lines = []
    for index in range(200):
        case = {"id": f"case-{index}",
                "input": [TextPart(text=f"What does screen {index} show?"),
                          ImagePart(data=screenshot, path="shots/screen.png")],
                "output": {"nested": [ImagePart(data=screenshot).model_dump(mode="json")]}}
        lines.append(json.dumps(store.externalise(case)))
    blobs = [p for p in (tmp_path / "run" / "blobs").rglob("*") if p.is_file()]
    assert len(blobs) == 1 and blobs[0].read_bytes() == screenshot
    assert max(len(line) for line in lines) < 600 < len(screenshot)
    stored = json.loads(lines[7])["input"][1]
    assert "data" not in stored and stored["path"] == "shots/screen.png"
    assert store.restore(stored).data == screenshot


def test_a_damaged_or_missing_blob_is_named(tmp_path):
    store = BlobStore(tmp_path)
    digest = store.put(b"\x89PNG\r\n\x1a\n not really")
    store.path_of(digest).write_bytes(b"changed")
    with pytest.raises(ContentError, match="does not hash to its name"):
        store.get(digest)
    with pytest.raises(ContentError, match="is missing from"):
        store.get("0" * 64)


def test_importing_referee_and_the_parts_loads_no_pillow():
    script = ("import sys, referee, referee.content\n"
              "from referee.content import ImagePart, load_part, BlobStore\n"
              "assert 'PIL' not in sys.modules and 'pypdf' not in sys.modules\n")
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                          timeout=120)
    assert done.returncode == 0, done.stderr


def test_trace_shapes_read_into_parts():
    png, document = picture(), pdf()
    expected = ImagePart(data=png).sha256
    assert load_part({"type": "blob", "modality": "image", "mime_type": "image/png",
                      "content": b64(png)}).sha256 == expected  # OTel GenAI semconv
    remote = load_part({"type": "uri", "modality": "image", "mime_type": "image/png",
                        "uri": "https://example.com/x.png"})
    assert isinstance(remote, ImagePart) and remote.url == "https://example.com/x.png"
    assert isinstance(load_part({"type": "blob", "modality": "document",
                                 "mime_type": "application/pdf", "content": b64(document)}),
                      DocumentPart)
    assert load_part({"type": "image", "image": {"url": f"data:image/png;base64,{b64(png)}"}}
                     ).sha256 == expected  # OpenInference message_content
    with pytest.raises(ContentError, match="audio parts are not images or PDFs"):
        load_part({"type": "blob", "modality": "audio", "mime_type": "audio/wav",
                   "content": "AAAA"})


def test_a_remote_part_of_a_type_no_provider_takes_is_refused_by_its_name_or_declared_type():
    with pytest.raises(ContentError, match=r"field 'input\[1\]': image part: unsupported "
                                           r"image media type image/svg\+xml"):
        load_part({"image": "https://example.com/logo.svg"}, field="input[1]")
    with pytest.raises(ContentError, match="unsupported document media type image/png"):
        load_part({"pdf": "https://example.com/chart.png"})
    # A recorder's alias of an accepted type is that type; a URL that names none is kept.
    declared = load_part({"type": "image", "url": "https://example.com/p", "mime_type": "image/jpg"})
    assert declared.media_type == "image/jpeg"
    assert load_part({"image": "https://example.com/p?id=3"}).media_type == ""
