"""A row's detail says at least what its list row says, with the same values (issue 20: `GET /quotas/{id}/` had
null usage where the list had numbers; `statements/{id}` had no `credit_amount`). Every list of the schema with a
detail path, for its first row, as a platform admin."""

from __future__ import annotations

import re

import pytest

from tests.routes.matrix import api_client, openapi_schema

DETAIL = re.compile(r"^(/api/v1/(?:[\w-]+/)+?)\{(\w+)\}/$")


def _pairs() -> list[tuple[str, str, str]]:
    paths = openapi_schema()["paths"]
    pairs = []
    for path, operations in paths.items():
        match = DETAIL.match(path)
        if match and "get" in operations and "get" in paths.get(match.group(1), {}):
            pairs.append((match.group(1), path, match.group(2)))
    return pairs


@pytest.mark.parametrize(("list_path", "detail_path", "field"), _pairs())
def test_detail_says_what_the_list_row_says(world, db, list_path, detail_path, field):
    client = api_client(world, "platform_admin")
    listed = client.get(list_path).json()
    rows = listed.get("results", []) if isinstance(listed, dict) else listed
    if not rows:
        pytest.skip(f"the world has no rows of {list_path}")
    row = rows[0]
    response = client.get(detail_path.replace("{" + field + "}", str(row[field])))
    assert response.status_code == 200, response.content[:300]
    detail = response.json()
    missing = sorted(set(row) - set(detail))
    assert not missing, f"{detail_path} lacks {missing}"
    differ = {key: (row[key], detail[key]) for key in row if row[key] != detail[key]}
    assert not differ, f"{detail_path} differs from its list row: {differ}"
