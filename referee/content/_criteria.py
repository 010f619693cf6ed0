"""Deterministic criteria over the images an output holds (found anywhere in the run: tool
results, turns, metadata; see ``find_parts``): equality with a reference image by perceptual
hash within a tolerance, and size/format bounds. No judge is asked."""

from __future__ import annotations

from abc import abstractmethod
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from referee.case import EvalCase
from referee.content._checks import DEFAULT_MAX_DISTANCE, image_problems, images_match
from referee.content._load import find_parts, load_part
from referee.content._parts import ContentError, ImagePart
from referee.content._scope import with_stored_bytes
from referee.criteria.base import SyncCriterion
from referee.execution import ExecutionResult
from referee.result import CriterionResult


def output_images(actual: ExecutionResult) -> list[ImagePart]:
    """The images of a run's output that carry their bytes (a re-scored run's read back from
    its blobs/)."""
    return _with_bytes(part for part in find_parts(actual) if isinstance(part, ImagePart))


def _with_bytes(images: Iterable[ImagePart]) -> list[ImagePart]:
    found = (with_stored_bytes(image) for image in images)
    return [image for image in found if isinstance(image, ImagePart) and image.data is not None]


def reference_image(reference: ImagePart | bytes | str | Path) -> ImagePart:
    """A reference image from a part, its bytes, a path or a ``data:`` URL."""
    if isinstance(reference, ImagePart):
        part = reference
    elif isinstance(reference, bytes):
        part = ImagePart(data=reference)
    else:
        text = str(reference)
        loaded = load_part({"image": text}, field="reference")
        if not isinstance(loaded, ImagePart):
            raise ContentError(f"reference {text} is not an image", field="reference")
        part = loaded
    if part.data is None:
        raise ContentError("a reference image needs its bytes (a file or a data: URL), not "
                           "only a URL", field="reference")
    return part


class _ImageCriterion(SyncCriterion):
    """Scores the output's images (``_score``); an output without one fails. Passes at 1.0."""

    def __init__(self, name: str | None) -> None:
        super().__init__(threshold=1.0)
        if name:
            self.name = name

    def runs_off_loop(self, actual: ExecutionResult, expected: EvalCase) -> bool:
        return True  # decoding images takes milliseconds: never on the run's event loop

    def evaluate_sync(self, actual: ExecutionResult, expected: EvalCase) -> CriterionResult:
        images = output_images(actual)
        if not images:
            return self._result(0.0, {"reason": "The output holds no image.", "images": 0})
        return self._score(images, expected)

    @abstractmethod
    def _score(self, images: list[ImagePart], expected: EvalCase) -> CriterionResult:
        """The result for the output's images (at least one)."""


class ImageMatches(_ImageCriterion):
    """The output holds an image that looks like ``reference``: the perceptual hashes differ
    in at most ``max_distance`` of 64 bits (copies re-encoded or resized stay within the
    default; different pictures land near 32). Score 1.0 or 0.0. Without ``reference``, each
    case's own expected images (``case.expected_media``) are the references, and a case
    without one is skipped."""

    name = "image_matches"
    description = "The output holds an image that looks like the reference image"

    def __init__(self, reference: ImagePart | bytes | str | Path | None = None, *,
                 max_distance: int = DEFAULT_MAX_DISTANCE, name: str | None = None) -> None:
        super().__init__(name)
        if not 0 <= max_distance <= 64:
            raise ContentError(f"max_distance must be between 0 and 64, got {max_distance}",
                               field="max_distance")
        self.reference = reference_image(reference) if reference is not None else None
        self.max_distance = max_distance

    def _score(self, images: list[ImagePart], expected: EvalCase) -> CriterionResult:
        references = [self.reference] if self.reference is not None else _with_bytes(
            part for part in expected.expected_media if isinstance(part, ImagePart))
        if not references:
            return self._skipped("The case holds no expected image to compare with")
        best, closest, reference = min(
            ((images_match(image, ref, self.max_distance)[1], image, ref)
             for ref in references for image in images), key=lambda found: found[0])
        matched = best <= self.max_distance
        reason = (f"{closest.label()} matches the reference (distance {best} of at most "
                  f"{self.max_distance})" if matched else
                  f"no output image matches the reference: the closest, {closest.label()}, "
                  f"is {best} bits away (at most {self.max_distance} allowed)")
        return self._result(1.0 if matched else 0.0, {
            "reason": reason, "distance": best, "max_distance": self.max_distance,
            "images": len(images), "reference_sha256": reference.sha256})


class ImageCheck(_ImageCriterion):
    """Every image the output holds meets the given format and size bounds (and there is at
    least one). Score: the share of images that meet them; passes at 1.0."""

    name = "image_check"
    description = "The output's images meet format and size bounds"

    def __init__(self, *, media_types: Iterable[str] | None = None,
                 min_width: int | None = None, min_height: int | None = None,
                 max_width: int | None = None, max_height: int | None = None,
                 max_bytes: int | None = None, name: str | None = None) -> None:
        super().__init__(name)
        self.bounds: dict[str, Any] = {
            "media_types": list(media_types) if media_types is not None else None,
            "min_width": min_width, "min_height": min_height, "max_width": max_width,
            "max_height": max_height, "max_bytes": max_bytes}

    def _score(self, images: list[ImagePart], expected: EvalCase) -> CriterionResult:
        problems = {image.label(): found for image in images
                    if (found := image_problems(image, **self.bounds))}
        reason = ("every image meets the bounds" if not problems else
                  "; ".join(f"{label}: {', '.join(found)}" for label, found in problems.items()))
        return self._result((len(images) - len(problems)) / len(images), {
            "reason": reason, "images": len(images), "problems": problems})
