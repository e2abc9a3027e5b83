"""The group a check id belongs to by the registries of validators.core.checks (an exact id or
a member of a family). The product never asks this (a Result carries its group): tests do, to
hold every id a validator or a fixture writes against the group it was written under."""

from __future__ import annotations

from stackgate.validator_groups import ValidatorGroup
from validators.core.checks import EXACT, family_of


def group_of(check: str) -> ValidatorGroup | None:
    if check in EXACT:
        return EXACT[check]
    family = family_of(check)
    return family.group if family else None
