"""Text that is safe to print to a terminal.

Case names, model output, judge replies and error texts are untrusted: an escape sequence in
them could recolour, move the cursor, retitle the window or erase what was printed. Whatever
referee prints to the console goes through ``terminal_safe``; stored data keeps every byte.
"""

from __future__ import annotations

import re

# ESC-introduced sequences: CSI (ESC [ ... final), OSC (ESC ] ... BEL or ST), and the
# two-byte ones (ESC 7, ESC c, ...); then the 8-bit CSI, then any control character left.
_SEQUENCE = re.compile(
    r"\x1b\[[0-?]*[ -/]*[@-~]"
    r"|\x1b\][^\x07\x1b]*(?:\x07|\x1b\\)?"
    r"|\x1b[P^_][^\x1b]*(?:\x1b\\)?"
    r"|\x1b[ -~]?"
    r"|\x9b[0-?]*[ -/]*[@-~]"
)
# C0 (but tab and newline) and C1 controls, and DEL. A carriage return is one too: it lets
# later text overwrite the start of the line.
_CONTROL = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f]")


def terminal_safe(text: str) -> str:
    """``text`` without escape sequences or control characters (tab and newline stay)."""
    if not text:
        return text
    return _CONTROL.sub("", _SEQUENCE.sub("", text))
