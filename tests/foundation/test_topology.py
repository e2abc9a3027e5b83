"""The one topology rule the builder and the validators share."""

from __future__ import annotations

from stackgate.topology import classify


def _links(n: int, nvlinked: set[tuple[int, int]], code: str = "NVLINK") -> dict[str, str]:
    return {
        f"{i}-{j}": code if (i, j) in nvlinked else "PCIE"
        for i in range(n)
        for j in range(i + 1, n)
    }


def test_no_profile_without_an_interconnect() -> None:
    assert classify(0, {}) is None
    assert classify(1, {}) is None


def test_all_pairs_nvlink_is_nvlink() -> None:
    assert classify(2, _links(2, {(0, 1)})) == "nvlink"
    every = {(i, j) for i in range(8) for j in range(i + 1, 8)}
    assert classify(8, _links(8, every, code="NV18")) == "nvlink"  # nvidia-smi topo codes


def test_partial_nvlink_is_pcie() -> None:
    # Bridged pairs (0-1, 2-3): a TP ring over all four GPUs still crosses PCIe.
    assert classify(4, _links(4, {(0, 1), (2, 3)})) == "pcie"
    assert classify(8, _links(8, set())) == "pcie"
    assert classify(2, {}) == "pcie"  # two GPUs, no NVLink reported
