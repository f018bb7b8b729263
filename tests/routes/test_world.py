"""The world the matrix runs on is whole: both tenants' rows are in every list, so that "B's names never reach
A's personas" is a real check and not a vacuous one. (If a list stops showing them, the leak tests of that list
prove nothing until the world gives it rows again.)"""

from __future__ import annotations

import pytest

from tests.routes.matrix import api_client
from tests.routes.world import A_MARKERS, B_MARKERS

# Lists of tenant-owned rows, each showing names of the rows' own (or their tenant's name).
LISTS = [
    "/api/v1/tenants/",
    "/api/v1/users/",
    "/api/v1/memberships/",
    "/api/v1/service-accounts/",
    "/api/v1/tokens/",
    "/api/v1/queues/",
    "/api/v1/quotas/",
    "/api/v1/quota-requests/",
    "/api/v1/admissions/",
    "/api/v1/workloads/",
    "/api/v1/templates/",
    "/api/v1/services/",
    "/api/v1/notification-channels/",
    "/api/v1/audit-events/",
    "/workloads/",
    "/workloads/templates/",
    "/tenants/",
    "/tenants/quota-requests/",
    "/accounts/memberships/",
    "/audit/",
]


@pytest.mark.parametrize("path", LISTS)
def test_the_platform_admin_sees_both_tenants(world, db, path):
    body = api_client(world, "platform_admin").get(path).content.decode()
    assert any(m in body for m in A_MARKERS) and any(m in body for m in B_MARKERS), path
