"""A secret-named setting's value is hidden by the one redaction (stackgate.credentials), in
every shape engines and tools print settings; names and values that are no secret are kept."""

from __future__ import annotations

import pytest

from stackgate.credentials import redact
from stackgate.safe_text import for_terminal


@pytest.mark.parametrize(
    ("text", "secret"),
    [
        ("ServerArgs(api_key='K1xyz', port=30000)", "K1xyz"),  # a Python repr
        ('ServerArgs(admin_api_key="K2xyz")', "K2xyz"),
        ("--api-key K3xyz --port 1", "K3xyz"),  # an argv flag and its value
        ("--hf-token=K4xyz", "K4xyz"),
        ('{"password": "a long pass phrase 5"}', "pass phrase"),  # JSON, a value with spaces
        ("{'db_password': 'K6xyz'}", "K6xyz"),
        ("AWS_SECRET_ACCESS_KEY=K7xyz", "K7xyz"),  # an environment line
        ("HF_TOKEN=K8xyz OTHER=1", "K8xyz"),
        ("hf_token: K9xyz", "K9xyz"),  # YAML
        ("GITHUB_TOKEN = K10xyz", "K10xyz"),
        ("secret_key: K11xyz", "K11xyz"),
        ("OPENAI_API_KEY=K12xyz", "K12xyz"),
        ("credentials=K13xyz", "K13xyz"),
        ("PASSWD=K14xyz", "K14xyz"),
        ("private_key='-K15xyz'", "K15xyz"),
    ],
)
def test_a_secret_settings_value_is_hidden(text: str, secret: str) -> None:
    assert secret not in redact(text)
    assert secret not in for_terminal(text)
    assert "***" in redact(text)


@pytest.mark.parametrize(
    "text",
    [
        "Decode batch. #running-req: 1, #token: 123, token usage: 0.01",  # SGLang's counts
        "max_total_tokens=5000 max_prefill_tokens=16384 tokenizer_path=/models/k2",
        "token_type=bearer sort_key=abc cache_key=x1",
        "ServerArgs(api_key=None, admin_api_key=None, ssl_keyfile=None)",
        'api_key="" password=true',
        "--api-key --port 30000",  # a flag without a value: the next flag is not its value
    ],
)
def test_no_secret_is_kept_as_printed(text: str) -> None:
    assert redact(text) == text


@pytest.mark.parametrize("before", ["x" * 40, "9" * 5, "A1" * 30, "git+"])
def test_user_info_after_a_long_run_of_letters_is_still_hidden(before: str) -> None:
    """The URL rule's scheme is bounded (a long letter run was scanned quadratically): a URL
    glued to a long run of letters or digits still has its user info hidden."""
    text = f"{before}https://alice:S3CRETPW@hub.example/x"
    assert "S3CRETPW" not in redact(text)
