"""Folder and output-file arguments, checked where they are parsed.

`builder wheelhouse --to /dev/null` was an OSError ("File exists", exit 3) after the lock was
read; `validators run --out-dir /dev/null` and `records verify --dir FIFO` went on (exit 0 / 1)
with a folder that is not one. A flag typed FOLDER is an argparse usage error (exit 2 naming
the flag) when its path exists and is not a folder, or when the nearest part of it that exists
is not a folder (`--to some-file/x`): nothing can be made there. A folder that does not exist
yet is fine (the command makes it).

Each path is looked at once (stackgate/path_kind.py): a folder a racer moved aside between
two looks read as "exists and is not a folder".
"""

from __future__ import annotations

import argparse
from pathlib import Path

from stackgate.path_kind import kind_of, nearest_part


def _shown(path: Path) -> str:
    """A name that is not UTF-8 (surrogate escapes) with backslashes, printable anywhere."""
    return str(path).encode("utf-8", "backslashreplace").decode("utf-8")


def _checked_text(text: str, kind: str) -> Path:
    """The path typed, refused when it is empty or holds NUL."""
    if not text.strip():
        raise argparse.ArgumentTypeError(f"an empty path is not a {kind}")
    if "\x00" in text:
        raise argparse.ArgumentTypeError(f"{_shown(Path(text))!r}: a path cannot hold NUL")
    return Path(text)


def _below_a_folder(path: Path, verb: str) -> Path:
    """`path` when the nearest part of it that exists is a folder; else a usage error."""
    parent, kind = nearest_part(path.parent)
    if kind != "folder":
        raise argparse.ArgumentTypeError(
            f"{_shown(path)}: {_shown(parent)} is not a folder, nothing can be {verb} below it"
        )
    return path


def folder_arg(text: str) -> Path:
    """An argparse type: a path that is a folder or can become one."""
    path = _checked_text(text, "folder")
    kind = kind_of(path)
    if kind is None:
        return _below_a_folder(path, "made")
    if kind != "folder":
        raise argparse.ArgumentTypeError(f"{_shown(path)} exists and is not a folder")
    return path


folder_arg.__name__ = "folder"
FOLDER = folder_arg


def output_file_arg(text: str) -> Path:
    """An argparse type: a file to write. A path that exists and is not a regular file or a
    symlink (/dev/null, a FIFO, a folder), or one whose nearest existing part is not a folder,
    is refused at parse, before the command runs (the writer refuses it too: files.py)."""
    path = _checked_text(text, "file")
    kind = kind_of(path, follow=False)
    if kind is None:
        return _below_a_folder(path, "written")
    if kind in ("link", "file"):
        return path
    raise argparse.ArgumentTypeError(
        f"{_shown(path)} exists and is not a regular file (a device, FIFO or folder is "
        "never replaced by an output file)"
    )


output_file_arg.__name__ = "output file"
OUTPUT_FILE = output_file_arg
