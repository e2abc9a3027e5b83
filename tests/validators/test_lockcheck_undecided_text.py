"""The pre-install SKIP of an arch check whose GPU code was read only in part says what is not
known (issue 29 item 5). It used to prefix the FAIL's own words: "undecided before install:
... torch 2.9.1 has no SASS that runs on 9.0a and no PTX ... (has )" -- status SKIP, words that
read as a verdict (torch cannot run on an H100), and an empty list."""

from __future__ import annotations

from validators.lockcheck.check import undecided_reason


def test_the_reason_says_undecided_names_the_files_and_claims_no_missing_code() -> None:
    files = ["torch/lib/libtorch_cuda.so"]
    evidence = {"libraries": {}, "cubins": {}, "targets": ["9.0a", "12.0a"]}
    reason = undecided_reason("static.arch.torch", files, evidence)
    assert reason == (
        "undecided before install: the GPU code of torch/lib/libtorch_cuda.so lies past the "
        "bytes read; the part read holds no GPU code this reader could see. Whether torch runs "
        "on 9.0a, 12.0a is known after install (static --env)"
    )
    assert "has no SASS" not in reason and "(has )" not in reason


def test_what_the_part_read_showed_is_listed_once_each() -> None:
    files = [f"nvidia/cublas/lib/lib{i}.so" for i in range(6)]
    evidence = {
        "libraries": {"a.so": ["sm_80", "sm_90"], "b.so": ["sm_90"]},
        "cubins": {"sm_100a": 2},
        "targets": ["12.0a"],
    }
    reason = undecided_reason("static.arch.nvidia-cublas", files, evidence)
    assert "lib3.so and 2 more lies past" in reason
    assert "the part read holds sm_100a, sm_80, sm_90." in reason
    assert "Whether nvidia-cublas runs on 12.0a is known after install" in reason
