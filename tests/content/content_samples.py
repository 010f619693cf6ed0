"""Images and PDFs made on the spot for the content tests (Pillow and pypdf, the test extra),
and read back out of a judge request in each provider's own format."""

from __future__ import annotations

import base64
import contextlib
import functools
import io

from PIL import Image, ImageDraw


@functools.cache
def picture(width: int = 320, height: int = 240, *, fmt: str = "PNG", seed: int = 0,
            mode: str = "RGB") -> bytes:
    """A picture with structure a perceptual hash can see: a diagonal gradient and shapes
    placed by ``seed``."""
    image = Image.new(mode, (width, height))
    draw = ImageDraw.Draw(image)
    for x in range(0, width, 4):
        shade = int(255 * x / max(1, width - 1))
        fill = (shade, 255 - shade, (shade * 3 + seed * 40) % 256)
        draw.rectangle([x, 0, x + 3, height], fill=fill if mode != "L" else shade)
    for index in range(4):
        left = (seed * 37 + index * 61) % max(1, width - width // 4)
        top = (seed * 53 + index * 29) % max(1, height - height // 4)
        colour = (255, 255, 255) if (seed + index) % 2 else (0, 0, 0)
        draw.ellipse([left, top, left + width // 4, top + height // 4],
                     fill=colour if mode != "L" else colour[0])
    out = io.BytesIO()
    image.save(out, format=fmt, **({"quality": 90} if fmt == "JPEG" else {}))
    return out.getvalue()


def pdf(pages: int = 1) -> bytes:
    from pypdf import PdfWriter

    writer = PdfWriter()
    for _ in range(pages):
        writer.add_blank_page(width=612, height=792)
    out = io.BytesIO()
    writer.write(out)
    return out.getvalue()


def sent_media(body: dict, provider: str, api_style: str) -> list[tuple[str, bytes]]:
    """(media type, bytes) of each image or document in a request, read in the provider's own
    format only."""
    def from_url(url: str) -> tuple[str, bytes]:
        head, _, payload = url.partition(",")
        return head[5:].split(";")[0], base64.b64decode(payload)

    found = []
    if provider == "openai" and api_style == "chat":
        for item in body["messages"][-1]["content"]:
            if item["type"] == "image_url":
                found.append(from_url(item["image_url"]["url"]))
            elif item["type"] == "file":
                found.append(from_url(item["file"]["file_data"]))
    elif provider == "openai":
        for item in body["input"][0]["content"]:
            if item["type"] == "input_image":
                found.append(from_url(item["image_url"]))
            elif item["type"] == "input_file":
                found.append(from_url(item["file_data"]))
    elif provider == "anthropic":
        for block in body["messages"][0]["content"]:
            if block["type"] in ("image", "document"):
                source = block["source"]
                found.append((source["media_type"], base64.b64decode(source["data"])))
    else:
        for part in body["contents"][0]["parts"]:
            blob = part.get("inlineData") or part.get("inline_data")
            if blob:
                found.append((blob.get("mimeType", blob.get("mime_type")),
                              base64.urlsafe_b64decode(blob["data"])))
    return found


@contextlib.contextmanager
def report_in_chromium(html_path, profile_dir, anchor: str):
    """A headless Chromium page showing the report at ``anchor``, once every thumbnail in it
    has loaded, and how many did (decoded: an image the browser could not read has no width)."""
    from chromium_cdp import Browser

    with Browser(profile_dir) as page:
        page.goto(html_path.as_uri() + anchor)
        decoded = page.wait_for(
            "Array.from(document.querySelectorAll('figure.media img'))"
            ".filter(img => img.complete && img.naturalWidth > 0).length")
        yield page, decoded
