"""What untrusted text may look like when stackgate prints or keeps it: the one place output
is made safe, used by every output boundary (the line writers and rich consoles of
stackgate.lines / stackgate.output, emit_json, the report, HTML and log files).

Two rules, always both:
- secrets are hidden (stackgate.credentials.redact: URL user info, secret-named query
  parameters such as private_token= / X-Amz-Credential= / X-Amz-Signature=, bearer and basic
  authorization values, recognisable tokens such as hf_...);
- for a terminal, control characters are shown, not obeyed: every C0 character but newline
  and tab, DEL and the C1 range (U+0080-U+009F, which some terminals read as ESC + letter)
  become `\\xNN` / `\\u00NN`. A node's `reasons` holding ESC[2J or an OSC window title print
  as text, on a terminal, piped and with NO_COLOR alike (rich strips only BEL/BS/VT/FF/CR).
  So do the Unicode direction controls (U+200E/U+200F marks, U+202A-U+202E embeddings and
  overrides, U+2066-U+2069 isolates): a terminal that lays text out both ways would show
  `\\u202eKO SSAP` (an override, then "KO SSAP") as "PASS OK"; they are escaped too.
"""

from __future__ import annotations

import re
import stat
from pathlib import Path
from typing import Any

from stackgate.credentials import redact

_CONTROL = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u200e\u200f\u202a-\u202e\u2066-\u2069]")


def _shown(match: re.Match[str]) -> str:
    code = ord(match.group(0))
    return f"\\x{code:02x}" if code < 0x80 else f"\\u{code:04x}"


def escape_controls(text: str) -> str:
    """Every control character but newline and tab, and every direction control, as a
    visible escape."""
    return _CONTROL.sub(_shown, text)


def for_terminal(text: str) -> str:
    """Text as it may reach a terminal or a pipe: secrets hidden, controls escaped."""
    return escape_controls(redact(text))


def redact_data(data: Any) -> Any:
    """`data` (JSON-like: dicts, lists, strings, numbers) with every string redacted (keys
    too); what --json prints and report files keep. JSON escapes control characters itself."""
    if isinstance(data, str):
        return redact(data)
    if isinstance(data, dict):
        return {redact_data(k): redact_data(v) for k, v in data.items()}
    if isinstance(data, list | tuple):
        return [redact_data(v) for v in data]
    return data


def redact_file(path: Path, max_bytes: int = 1 << 30) -> bool:
    """Hide the secrets in a log a child process wrote straight to `path` (an engine's, a
    probe's), once it is done: the file is rewritten (a new file renamed over it) only where
    something was hidden. True when it was. A log over max_bytes is left as it is."""
    try:
        info = path.lstat()
        if not stat.S_ISREG(info.st_mode) or info.st_size > max_bytes:
            return False
        text = path.read_bytes().decode("utf-8", errors="surrogateescape")
    except OSError:
        return False
    hidden = redact(text)
    if hidden == text:
        return False
    from stackgate.files import atomic_write_bytes

    atomic_write_bytes(path, hidden.encode("utf-8", errors="surrogateescape"), durable=False)
    return True
