"""Images and PDFs made on the spot for the content tests (Pillow and pypdf, the test extra)."""

from __future__ import annotations

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
