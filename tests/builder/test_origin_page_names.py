"""The listing check normalizes only the entries of an index page whose file name it looks for
(builder.lock.origin.parse_page with `names`): the answer for every wanted URL is the same as
normalizing every entry, on JSON (PEP 691) and HTML (PEP 503) pages, with percent-encoded local
versions, relative links, query strings and fragments; a file:// page is read whole (a local
index may link a file under another name)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from builder.lock.origin import file_name, normal_url, parse_page

PAGE = "https://pypi.example/simple/torch/"
ENTRIES = [
    ("https://files.example/packages/aa/torch-2.9.1%2Bcu128-cp312-cp312-linux_x86_64.whl", "a" * 64),
    ("https://files.example/packages/bb/torch-2.9.1-cp312-cp312-manylinux_2_28_x86_64.whl", "b" * 64),
    ("../../packages/cc/torch-2.9.0-cp311-cp311-manylinux_2_28_x86_64.whl", "c" * 64),
    ("https://files.example/packages/dd/torch-2.9.1.tar.gz?download=1", "d" * 64),
    ("https://files.example/packages/ee/torch-2.8.0-py3-none-any.whl", None),
]


def _json_page() -> bytes:
    files = [
        {"url": url, "filename": file_name(url), "hashes": {"sha256": sha} if sha else {}}
        for url, sha in ENTRIES
    ]
    return json.dumps({"meta": {"api-version": "1.0"}, "files": files}).encode()


def _html_page() -> bytes:
    links = [
        f'<a href="{url}#sha256={sha}">x</a>' if sha else f'<a href="{url}">x</a>'
        for url, sha in ENTRIES
    ]
    return ("<html><body>" + "".join(links) + "</body></html>").encode()


@pytest.mark.parametrize("kind", ["application/vnd.pypi.simple.v1+json", "text/html"])
def test_only_wanted_entries_and_the_same_answer_for_them(kind: str) -> None:
    body = _json_page() if "json" in kind else _html_page()
    whole = parse_page(body, PAGE, kind)
    assert len(whole) == len(ENTRIES)
    for wanted_url in whole:
        part = parse_page(body, PAGE, kind, {file_name(wanted_url)})
        assert part == {wanted_url: whole[wanted_url]}
    # the lock's URL form (normalized, '+' decoded) names the same file as the page's
    locked = normal_url(ENTRIES[0][0], Path("/"))
    assert parse_page(body, PAGE, kind, {file_name(locked)}) == {locked: "a" * 64}
    assert parse_page(body, PAGE, kind, {"torch-9.9.9-py3-none-any.whl"}) == {}


def test_a_file_page_is_read_whole() -> None:
    body = _html_page()
    page = "file:///srv/index/torch/"
    assert parse_page(body, page, "text/html", {"nothing.whl"}) == parse_page(body, page, "text/html")
