"""Index credentials never go into a file or log stackgate writes.

uv takes credentials for a named index from the environment (UV_INDEX_<NAME>_USERNAME and
UV_INDEX_<NAME>_PASSWORD, NAME upper-cased with every non-alphanumeric as `_`), from netrc and
from a keyring (UV_KEYRING_PROVIDER=subprocess); see docs/guarantees.md. stackgate works the
same way: a manifest (a committed file, copied into records and images) may not carry
credentials at all, and `--index-map NAME=https://user:pass@host/simple` is split into a clean
URL, which goes into the generated project, and the two variables above, which only the uv
processes see. Text that reaches logs or errors passes through `redact`.
"""

from __future__ import annotations

import re
from urllib.parse import unquote, urlsplit, urlunsplit

# The user info is everything up to the LAST `@` of the authority (which ends at `/`, `?`, `#`):
# that is how urlsplit and uv read `https://user:p@ss@host`, so a password holding `@` is hidden
# whole, not cut at its first `@`.
# Both parts are bounded: unbounded, a long run of letters (a base64 blob in an engine's log)
# is scanned from every one of its positions, quadratic in its length.
_USERINFO = re.compile(r"(?P<scheme>[A-Za-z][A-Za-z0-9+.-]{0,31}://)(?P<info>[^/?#\s]{1,4096})@")


# A query parameter whose name says it carries a secret (`?private_token=`, `?access_key=`,
# `?sig=`): package registries take tokens there too. uv has no variable for it, so such a URL
# is refused wherever it would be written, and its value is hidden wherever it is printed.
_SECRET_PARAM = re.compile(
    r"(?i)(?P<name>[?&;][\w.-]*(?:token|secret|passw|pwd|key|auth|sig|credential)[\w.-]*=)"
    r"(?P<value>[^&;#\s'\"]+)"
)


# Tokens whose shape gives them away wherever they sit: in a variable with an ordinary name
# (`MY_HF = "hf_..."`), an engine argument, run evidence, a note, a log line. Hugging Face,
# GitHub, GitLab, OpenAI/Anthropic-style `sk-`, AWS access key ids, Slack, PyPI and npm tokens,
# PEM private keys. A token of another shape in an ordinary-named field is not recognised.
_TOKEN = re.compile(
    r"(?<![A-Za-z0-9])(?:"
    r"hf_[A-Za-z0-9]{30,}"
    r"|gh[pousr]_[A-Za-z0-9]{30,}"
    r"|github_pat_[A-Za-z0-9_]{30,}"
    r"|glpat-[A-Za-z0-9_-]{20,}"
    r"|sk-[A-Za-z0-9_-]*?[A-Za-z0-9]{20}[A-Za-z0-9_-]*"
    r"|(?:AKIA|ASIA)[0-9A-Z]{16}(?![A-Za-z0-9])"
    r"|xox[abprs]-[A-Za-z0-9-]{10,}"
    r"|pypi-AgEIcHlwaS5vcmc[A-Za-z0-9_-]+"
    r"|npm_[A-Za-z0-9]{36}"
    r"|-----BEGIN [A-Z ]*PRIVATE KEY-----)"
)
_KIND = re.compile(r"(?:AKIA|ASIA|[a-z]+?[_-])")

# An HTTP authorization value in text (a header echoed in a log or an error, a curl line):
# `Authorization: Bearer <token>`, `Bearer <token>`, `Basic <base64>`, `token <token>`.
_AUTH_VALUE = re.compile(
    r"(?i)(?P<head>\bauthorization\s*[:=]\s*[\"']?(?:(?:bearer|basic|token)\s+)?"
    r"|\b(?:bearer|basic)\s+)"
    # a value: one with a digit, or 20 characters long (not "Basic authentication")
    r"(?P<value>(?=[A-Za-z._~+/=-]*[0-9]|[A-Za-z0-9._~+/=-]{20})[A-Za-z0-9._~+/=-]{8,})"
)


# A value given to a setting whose name says it is a secret, as engines print their settings:
# `api_key='...'` (a Python repr), `"password": "..."` (JSON), `AWS_SECRET_ACCESS_KEY=...`
# (an environment), `hf_token: ...` (YAML), `--api-key VALUE` / `--api-key=VALUE` (an argv).
# The name must END in the secret word (`max_total_tokens`, `tokenizer_path`, `sort_key` are
# not secrets) and the value must hold a letter (`#token: 123` is SGLang's token count), and
# None/null/true/false are not values.
_SECRET_WORDS = (
    r"(?:api[_-]?key|access[_-]?key|secret[_-]?key|private[_-]?key|auth[_-]?key|secret"
    r"|passw(?:or)?d|pwd|token|credentials?)"
)
_VALUE = (
    # quoted: everything up to the closing quote (a password may hold spaces)
    r"(?<=\")[^\"\n]*[A-Za-z][^\"\n]*(?=\")|(?<=')[^'\n]*[A-Za-z][^'\n]*(?=')"
    # bare: up to a space, quote or closing bracket
    r"|(?<![\"'])(?!(?:None|null|nil|true|false|True|False)(?![^\s\"',;)}\]]))"
    r"(?=[^\s\"',;)}\]]*[A-Za-z])[^\s\"',;)}\]*]+"
)
_SECRET_SETTING = re.compile(
    r"(?P<head>(?<![A-Za-z0-9_.-])(?:"
    # name = value, name: value, "name": "value", name='value'
    rf"[A-Za-z0-9_.-]*?{_SECRET_WORDS}[\"']?\s*[:=]\s*[\"']?"
    # --name VALUE, --name=VALUE
    rf"|--[A-Za-z0-9_-]*?{_SECRET_WORDS}(?:=|\s+)(?!-)[\"']?"
    rf"))(?P<value>{_VALUE})",
    re.IGNORECASE,
)


def _kind(token: str) -> str:
    if token.startswith("-----"):
        return "PRIVATE KEY"
    match = _KIND.match(token)
    return match.group(0) if match else token[:3]


def find_token(text: str) -> str | None:
    """What kind of token text holds (`hf_`, `sk-`, `AKIA`, `PRIVATE KEY`...), None if none."""
    match = _TOKEN.search(text)
    return None if match is None else _kind(match.group(0))


def find_secrets(data: object, where: str = "") -> list[tuple[str, str]]:
    """(dotted path, what) for every string in nested dicts/lists holding a credential URL or a
    recognisable token; the value itself is never returned."""
    out: list[tuple[str, str]] = []
    todo: list[tuple[str, object]] = [(where, data)]
    while todo:
        path, value = todo.pop()
        if isinstance(value, dict):
            todo.extend((f"{path}.{k}" if path else str(k), v) for k, v in value.items())
        elif isinstance(value, list):
            todo.extend((f"{path}.{i}" if path else str(i), v) for i, v in enumerate(value))
        elif isinstance(value, str):
            if (kind := find_token(value)) is not None:
                out.append((path, f"what looks like a {kind} token"))
            elif "://" in value and has_credentials(value):
                out.append((path, f"a URL with credentials ({redact(value)})"))
    return sorted(out)


# What the JSON text of data must hold for find_secrets(data) to find anything: a literal that
# starts every token shape of _TOKEN (each appears verbatim in JSON: no escape makes or hides
# one), a URL whose authority holds `@` (an escape pair counts as one character, an unescaped
# quote ends the string), or a parameter named like a secret. Looser than the walk's own tests
# (the text holds no lookbehind, no whitespace rule), never tighter.
_TOKEN_STARTS = (
    "hf_", "ghp_", "gho_", "ghu_", "ghs_", "ghr_", "github_pat_", "glpat-", "sk-", "AKIA",
    "ASIA", "xoxa-", "xoxb-", "xoxp-", "xoxr-", "xoxs-", "pypi-AgEIcHlwaS5vcmc", "npm_",
    "-----BEGIN ",
)  # fmt: skip
_URL_WITH_AT = re.compile(r'://(?:[^/?#"\\]|\\.)*@')


def secrets_in(data: object, text: str) -> list[tuple[str, str]]:
    """find_secrets(data), where text is data as JSON: a few C searches of the text decide
    whether the slow walk is needed (a record holds tens of thousands of numbers).

    A token after an escape (`"line\\nhf_..."`) is found: in the text a letter (`n`) stands
    before it, which _TOKEN's lookbehind would refuse, so the text is searched for the token's
    start, and the walk judges each decoded string."""
    if (
        any(start in text for start in _TOKEN_STARTS)
        or _URL_WITH_AT.search(text)
        or _SECRET_PARAM.search(text)
    ):
        return find_secrets(data)
    return []


def has_credentials(url: str) -> bool:
    """User info that can be a secret: a password, or any user info of an http(s) URL (tokens
    often sit in the user part), or a query parameter named like a secret (`?token=`).
    `ssh://git@host/...` names an ssh login, not a secret."""
    if _SECRET_PARAM.search(url):
        return True
    try:
        parts = urlsplit(url)
    except ValueError:
        return bool(_USERINFO.search(url))
    if parts.password is not None:
        return True
    return parts.username is not None and parts.scheme.endswith(("http", "https"))


def strip_credentials(url: str) -> tuple[str, str | None, str | None]:
    """(url without user info, username, password)."""
    parts = urlsplit(url)
    if parts.username is None and parts.password is None:
        return url, None, None
    host = parts.hostname or ""
    if ":" in host:
        host = f"[{host}]"
    netloc = host + (f":{parts.port}" if parts.port is not None else "")
    clean = urlunsplit((parts.scheme, netloc, parts.path, parts.query, parts.fragment))
    user = unquote(parts.username) if parts.username is not None else None
    password = unquote(parts.password) if parts.password is not None else None
    return clean, user, password


def redact(text: str) -> str:
    """Every `scheme://user:pass@` (or `scheme://token@`) in text as `scheme://***@`, every
    recognisable token as its prefix and `***`, every bearer / basic authorization value,
    secret-named query parameter value and secret-named setting's value as `***`. The one redaction: stackgate.safe_text
    applies it at every output boundary."""
    text = _USERINFO.sub(lambda m: f"{m.group('scheme')}***@", text)
    text = _TOKEN.sub(lambda m: f"{_kind(m.group(0))}***", text)
    text = _AUTH_VALUE.sub(lambda m: f"{m.group('head')}***", text)
    text = _SECRET_PARAM.sub(lambda m: f"{m.group('name')}***", text)
    return _SECRET_SETTING.sub(lambda m: f"{m.group('head')}***", text)


def index_env_names(name: str) -> tuple[str, str]:
    """The variables uv reads the credentials of index `name` from."""
    key = re.sub(r"[^A-Z0-9]", "_", name.upper())
    return f"UV_INDEX_{key}_USERNAME", f"UV_INDEX_{key}_PASSWORD"


def credential_env(name: str, url: str) -> dict[str, str]:
    """UV_INDEX_<NAME>_USERNAME/PASSWORD for the user info in url ({} when it has none)."""
    _clean, user, password = strip_credentials(url)
    user_var, pass_var = index_env_names(name)
    out: dict[str, str] = {}
    if user is not None:
        out[user_var] = user
    if password is not None:
        out[pass_var] = password
    return out
