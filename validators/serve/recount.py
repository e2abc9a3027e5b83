"""Count an engine's completion tokens again, with the env's own tokenizer.

`usage.completion_tokens` is the server's claim; SseParser checks it against the stream's
shape, which a server inflating every chunk consistently passes. This module re-tokenizes each
request's streamed text with the served model's tokenizer, loaded in the ENV's python (stackgate
has neither transformers nor tokenizers), in one child process kept for the whole benchmark.

Re-tokenizing decoded text is not the identity: non-canonical pieces merge on re-encoding, byte
tokens decoding to U+FFFD re-count as more, and special tokens (EOS under ignore_eos) stream as
empty text. So the bound is tight on inflation, plus a loose floor:

    claim <= (recount + empty-text chunks) * (1 + CLAIM_OVER_FRACTION) + CLAIM_OVER_TOKENS
    claim * CLAIM_UNDER_FACTOR + CLAIM_OVER_TOKENS >= recount

A request outside either fails naming both numbers (its level FAILs). A tokenizer that cannot
load, or a child that stops answering, gives serve-bench.token_counts SKIP or ERROR naming why;
the claims are then only checked against the stream.
"""

from __future__ import annotations

import contextlib
import json
import os
import select
import subprocess
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from stackgate import proc as procs
from stackgate.manifest import ServingProfile
from validators.core.results import Status
from validators.serve.bench_client import RequestOutcome

# A request's claim may run ahead of what its text re-counts to by this much (see above).
CLAIM_OVER_FRACTION = 0.15
CLAIM_OVER_TOKENS = 2
CLAIM_UNDER_FACTOR = 3
LOAD_TIMEOUT_S = 300.0  # importing transformers in a large env takes tens of seconds
# Per batch: 1 s plus this per KiB of text (a byte-level BPE counts MB/s).
COUNT_TIMEOUT_S = 60.0
MAX_ANSWER_BYTES = 16 << 20

# Runs under the env's python (-I): stdlib + transformers or tokenizers, never stackgate.
_CHILD = r"""
import json, os, sys
os.environ["HF_HUB_OFFLINE"] = "1"
os.environ["TRANSFORMERS_OFFLINE"] = "1"
out = sys.stdout
sys.stdout = sys.stderr  # a library's prints must not mix with the answers
def say(obj):
    out.write(json.dumps(obj) + "\n")
    out.flush()
source, trust = sys.argv[1], sys.argv[2] == "1"
try:
    try:
        from transformers import AutoTokenizer
    except ImportError as exc:
        AutoTokenizer = None
        no_tf = str(exc)
    if AutoTokenizer is not None:
        tok = AutoTokenizer.from_pretrained(source, trust_remote_code=trust)
        count = lambda s: len(tok.encode(s, add_special_tokens=False))
        how = "transformers " + type(tok).__name__
    else:
        try:
            from tokenizers import Tokenizer
        except ImportError:
            say({"ok": False, "why": "the env has neither transformers nor tokenizers (" + no_tf + ")"})
            sys.exit(0)
        path = os.path.join(source, "tokenizer.json") if os.path.isdir(source) else source
        tk = Tokenizer.from_file(path)
        count = lambda s: len(tk.encode(s, add_special_tokens=False).ids)
        how = "tokenizers " + path
except Exception as exc:
    say({"ok": False, "why": (type(exc).__name__ + ": " + str(exc))[:600]})
    sys.exit(0)
say({"ok": True, "how": how})
for line in sys.stdin:
    say([count(t) for t in json.loads(line)])
"""


class RecountUnavailable(Exception):
    """No count could be had (tokenizer not loadable, child died or stopped answering)."""


def tokenizer_source(profile: ServingProfile) -> str:
    """Where the served model's tokenizer is: `--tokenizer-path`/`--tokenizer` among the
    engine's extra arguments (SGLang, vLLM), else the model path."""
    args = profile.extra_args
    for i, arg in enumerate(args):
        for flag in ("--tokenizer-path", "--tokenizer"):
            if arg == flag and i + 1 < len(args):
                return args[i + 1]
            if arg.startswith(flag + "="):
                return arg.split("=", 1)[1]
    return profile.model_path


@dataclass
class Recounter:
    """One child process of the env's python holding the tokenizer."""

    proc: subprocess.Popen[bytes]
    how: str
    source: str
    _buffer: bytearray = field(default_factory=bytearray)

    @classmethod
    def start(
        cls, python: str, source: str, *, trust_remote_code: bool, timeout_s: float = LOAD_TIMEOUT_S
    ) -> Recounter:
        """Load the tokenizer; RecountUnavailable naming why when it cannot be."""
        try:
            proc = subprocess.Popen(
                [python, "-I", "-c", _CHILD, source, "1" if trust_remote_code else "0"],
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=subprocess.DEVNULL,
                env=procs.child_env(),
            )
        except OSError as exc:
            raise RecountUnavailable(f"cannot run {python}: {exc}") from None
        self = cls(proc, "", source)
        try:
            hello = json.loads(self._line(timeout_s, f"loading the tokenizer of {source}"))
        except ValueError:
            self.close()
            raise RecountUnavailable(f"{python} answered something else than a tokenizer") from None
        except BaseException:  # RecountUnavailable, or a signal while it loads
            self.close()
            raise
        if not isinstance(hello, dict) or hello.get("ok") is not True:
            self.close()
            why = hello.get("why") if isinstance(hello, dict) else hello
            raise RecountUnavailable(f"no tokenizer for {source!r} in {python}: {why}")
        self.how = str(hello.get("how", ""))[:200]
        return self

    def count(self, texts: Sequence[str]) -> list[int]:
        """Token counts of `texts`, in order."""
        if not texts:
            return []
        payload = json.dumps(list(texts)).encode() + b"\n"
        stdin = self.proc.stdin
        assert stdin is not None

        def write() -> None:  # in a thread: a child that stops reading cannot block us
            try:
                stdin.write(payload)
                stdin.flush()
            except OSError:
                pass

        threading.Thread(target=write, daemon=True).start()
        timeout = COUNT_TIMEOUT_S + len(payload) / 1024
        try:
            answer = json.loads(self._line(timeout, f"counting {len(texts)} texts"))
        except ValueError:
            answer = None
        if (
            not isinstance(answer, list)
            or len(answer) != len(texts)
            or not all(type(n) is int and n >= 0 for n in answer)
        ):
            self.close()
            raise RecountUnavailable("the tokenizer process answered something else than counts")
        return answer

    def _line(self, timeout_s: float, doing: str) -> bytes:
        stdout = self.proc.stdout
        assert stdout is not None
        fd = stdout.fileno()
        deadline = time.monotonic() + timeout_s
        while b"\n" not in self._buffer:
            left = deadline - time.monotonic()
            if left <= 0:
                self.close()
                raise RecountUnavailable(
                    f"the tokenizer process took over {timeout_s:.0f} s {doing}"
                )
            ready, _, _ = select.select([fd], [], [], left)
            if not ready:
                continue
            chunk = os.read(fd, 1 << 16)
            if not chunk:
                code = self.proc.wait()
                raise RecountUnavailable(f"the tokenizer process exited ({code}) while {doing}")
            self._buffer += chunk
            if len(self._buffer) > MAX_ANSWER_BYTES:
                self.close()
                raise RecountUnavailable("the tokenizer process answered more than 16 MiB")
        cut = self._buffer.index(b"\n")
        line = bytes(self._buffer[:cut])
        del self._buffer[: cut + 1]
        return line

    def close(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
        self.proc.wait()
        for pipe in (self.proc.stdin, self.proc.stdout):
            if pipe is not None:
                with contextlib.suppress(OSError):
                    pipe.close()


def disagreement(claim: int, recount: int, empty_chunks: int) -> str:
    """Why a request's claimed completion tokens disagree with its re-counted text ("" if not)."""
    shown = recount + empty_chunks
    if claim > shown * (1 + CLAIM_OVER_FRACTION) + CLAIM_OVER_TOKENS:
        extra = f" and {empty_chunks} chunks of empty text" if empty_chunks else ""
        return (
            f"the server claims {claim} completion tokens, its streamed text re-counts to "
            f"{recount} tokens with the model's tokenizer{extra}"
        )
    if claim * CLAIM_UNDER_FACTOR + CLAIM_OVER_TOKENS < recount:
        return (
            f"the server claims {claim} completion tokens, its streamed text re-counts to "
            f"{recount} tokens with the model's tokenizer (more than {CLAIM_UNDER_FACTOR}x)"
        )
    return ""


@dataclass
class Tally:
    """What the re-count found over a benchmark (serve-bench.token_counts)."""

    requests: int = 0
    claimed: int = 0
    recounted: int = 0
    failed: list[str] = field(default_factory=list)


class Recheck:
    """serve-bench's re-count: run_level's `check`, then the token_counts verdict."""

    def __init__(self, recounter: Recounter | None, why: str = "") -> None:
        self.recounter = recounter
        self.skipped = why  # no tokenizer from the start: SKIP naming why
        self.broke = ""  # the tokenizer process failed later: ERROR naming why
        self.tally = Tally()
        self.by_tokenizer = 0  # requests of a server that reported no usage: counted here

    @classmethod
    def start(cls, python: str, profile: ServingProfile) -> Recheck:
        source = tokenizer_source(profile)
        try:
            return cls(Recounter.start(python, source, trust_remote_code=profile.trust_remote_code))
        except RecountUnavailable as exc:
            return cls(None, str(exc))

    def __call__(self, outcomes: Sequence[RequestOutcome]) -> None:
        ok = [o for o in outcomes if o.success]
        if self.recounter is not None and ok:
            try:
                counts = self.recounter.count([o.text for o in ok])
            except RecountUnavailable as exc:
                self.broke, self.recounter = str(exc), None
            else:
                for outcome, recount in zip(ok, counts, strict=True):
                    self._judge(outcome, recount)
        for outcome in outcomes:
            outcome.text = ""  # judged: not kept for the level's numbers

    def _judge(self, outcome: RequestOutcome, recount: int) -> None:
        tally = self.tally
        tally.requests += 1
        tally.recounted += recount
        if not outcome.claimed:
            # The server reported no usage: the stream's tokens are what the tokenizer counts.
            self.by_tokenizer += 1
            outcome.output_len = max(outcome.output_len, recount + outcome.empty_chunks)
            tally.claimed += outcome.output_len
            return
        tally.claimed += outcome.output_len
        why = disagreement(outcome.output_len, recount, outcome.empty_chunks)
        if why:
            outcome.success, outcome.error = False, why
            tally.failed.append(why)

    def close(self) -> None:
        if self.recounter is not None:
            self.recounter.close()

    def verdict(self) -> tuple[Status, str, dict[str, Any]]:
        tally = self.tally
        evidence: dict[str, Any] = {
            "tokenizer": self.recounter.how if self.recounter else "",
            "source": self.recounter.source if self.recounter else "",
            "requests": tally.requests,
            "claimed_tokens": tally.claimed,
            "recounted_tokens": tally.recounted,
            "counted_by_tokenizer": self.by_tokenizer,
            "disagreements": tally.failed[:5],
        }
        unchecked = "; the server's token counts were checked against the stream's shape only"
        if self.skipped:
            return "SKIP", f"not re-counted: {self.skipped}{unchecked}", evidence
        if self.broke:
            return "ERROR", f"re-count stopped: {self.broke}{unchecked} from there", evidence
        if tally.failed:
            return (
                "FAIL",
                f"{len(tally.failed)} of {tally.requests} requests claim tokens their streamed "
                f"text does not bear out: {tally.failed[0]}",
                evidence,
            )
        return (
            "PASS",
            f"{tally.requests} requests: the server claimed {tally.claimed} completion tokens, "
            f"the model's tokenizer re-counts {tally.recounted} from the streamed text",
            evidence,
        )
