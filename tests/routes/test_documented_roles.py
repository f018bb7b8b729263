"""The role table the matrix asserts is the documented one. tests/routes/policy.py takes what each role allows from
`ROLE_ACTIONS`; this holds that table to docs/permissions.md's, so a role quietly widened in the code (a viewer
that may operate) fails here instead of moving the matrix's expectations along with it."""

from __future__ import annotations

import re
from pathlib import Path

from apps.accounts.roles import ROLE_ACTIONS, SUBTREE_ROLES, Action, Role

DOC = Path(__file__).resolve().parents[2] / "docs" / "permissions.md"


def _documented() -> tuple[dict[str, frozenset[str]], set[str]]:
    """docs/permissions.md's "Roles" table: role -> actions ticked, and the roles whose grant covers a subtree."""
    text = DOC.read_text()
    section = text.split("## Roles", 1)[1].split("\n## ", 1)[0]
    lines = [line for line in section.splitlines() if line.startswith("|")]
    header = [cell.strip() for cell in lines[0].strip("|").split("|")]
    actions = header[3:]
    roles, subtree = {}, set()
    for line in lines[2:]:
        cells = [cell.strip() for cell in line.strip("|").split("|")]
        role = cells[0].strip("`")
        roles[role] = frozenset(action for action, tick in zip(actions, cells[3:], strict=True) if tick == "✓")
        if re.search(r"subtree", cells[2]):
            subtree.add(role)
    return roles, subtree


def test_the_code_allows_each_role_what_the_documentation_says():
    roles, _subtree = _documented()
    assert set(roles) == set(Role.values)
    assert {role: roles[role] for role in Role.values} == {role: ROLE_ACTIONS[role] for role in Role.values}
    assert set().union(*roles.values()) <= set(Action.values)


def test_only_the_documented_roles_cover_a_subtree():
    _roles, subtree = _documented()
    assert subtree == set(SUBTREE_ROLES)
