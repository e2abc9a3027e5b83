"""A kernels request: which just-in-time kernels an env's engines will ask for, built at build time.

One JSON file per request (`builder build --kernels FILE`, repeatable):

    {"arch": "9.0a", "kernels": [
      {"engine": "flashinfer", "call": "flashinfer.jit.norm:gen_norm_module"},
      {"engine": "sglang", "call": "sglang.kernels.ops.activation.activation:activation_module",
       "args": ["torch.bfloat16"]}]}

`call` is the engine's own function that makes the kernel (`module:attr.attr`); `args` and
`kwargs` are its arguments as JSON, with `torch.<dtype>` written as a string. The arch is one of
the stack's `host.target_archs`: a kernel for another GPU is a finding of the static group, not
something to build on purpose.
"""

from __future__ import annotations

import hashlib
import json
import re
from pathlib import Path
from typing import Any

from pydantic import Field, ValidationError, field_validator

from stackgate.build_record import KernelEngine
from stackgate.errors import BadInput
from stackgate.files import read_json_file
from stackgate.manifest.values import parse_arch
from stackgate.model import StrictModel, validation_problems

_CALL = re.compile(r"^[A-Za-z_][\w.]*:[A-Za-z_][\w.]*$")

Engine = KernelEngine


class KernelSpec(StrictModel):
    engine: Engine = Field(description="Whose just-in-time build makes it.")
    call: str = Field(description="`package.module:function` returning or building the kernel.")
    args: list[Any] = Field(default_factory=list)
    kwargs: dict[str, Any] = Field(default_factory=dict)

    @field_validator("call")
    @classmethod
    def _call(cls, value: str) -> str:
        if not _CALL.match(value):
            raise ValueError(f"'{value}' is not `package.module:function`")
        return value


class KernelRequest(StrictModel):
    arch: str = Field(description="The GPU arch to build for, e.g. 9.0a (one of target_archs).")
    kernels: list[KernelSpec] = Field(min_length=1)

    @field_validator("arch")
    @classmethod
    def _arch(cls, value: str) -> str:
        return parse_arch(value, where="arch")


def canonical_bytes(request: KernelRequest) -> bytes:
    return json.dumps(request.model_dump(mode="json"), sort_keys=True).encode()


def request_digest(requests: list[KernelRequest]) -> str:
    """sha256 over the requests' canonical JSON: what the env's kernels are a function of
    (with the locked engine versions and the toolchain, which the record states beside it)."""
    digest = hashlib.sha256()
    for request in requests:
        digest.update(canonical_bytes(request))
    return digest.hexdigest()


def load_request(path: Path, target_archs: list[str]) -> KernelRequest:
    """The request in `path`; BadInput naming the file and the field when it is wrong."""
    raw = read_json_file(path)
    try:
        request = KernelRequest.model_validate(raw)
    except ValidationError as exc:
        raise BadInput(f"{path}: not a kernels request", details=validation_problems(exc)) from None
    except BadInput as exc:  # parse_arch inside a validator
        raise BadInput(f"{path}: {exc.message}") from None
    if target_archs and request.arch not in target_archs:
        raise BadInput(
            f"{path}: arch: {request.arch} is not one of the stack's target_archs "
            f"({', '.join(target_archs)})"
        )
    return request
