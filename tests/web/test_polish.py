"""Live lists and pages (htmx polling that stops at terminal states), counted progress, confirm dialogs that name
their impact, breadcrumbs and the skip link."""

import pytest
from django.urls import reverse

from apps.operations.models import Operation
from tests.utils.personas import fresh

pytestmark = pytest.mark.django_db

HX = {"HTTP_HX_REQUEST": "true"}


def test_operation_list_polls_while_something_runs(personas, client):
    op = Operation.objects.create(kind="health.drain", tenant=personas.a, status="running", progress=30)
    client.force_login(fresh(personas.member_a))
    url = reverse("operations:operation_list")
    page = client.get(url)
    body = page.content.decode()
    assert 'id="list-region"' in body and 'hx-trigger="every 5s"' in body and "Updating every 5 s" in body
    assert "HX-Request" in page["Vary"]  # the page and its partial share the URL
    partial = client.get(url, {"kind": "health"}, **HX)
    text = partial.content.decode()
    assert "<html" not in text and text.lstrip().startswith('<div id="list-region"')
    assert f'href="/operations/{op.pk}/"' in text and 'hx-get="/operations/?kind=health"' in text
    Operation.objects.filter(pk=op.pk).update(status="succeeded", progress=100)
    done = client.get(url, **HX).content.decode()
    assert "hx-trigger" not in done and "Updating every" not in done  # nothing left to change: polling stops


def test_operation_shows_counted_progress(personas, client):
    op = Operation.objects.create(
        kind="health.drain",
        tenant=personas.a,
        status="running",
        progress=37.5,
        steps_done=3,
        steps_total=8,
        steps_label="workloads evicted",
    )
    client.force_login(fresh(personas.member_a))
    detail = client.get(reverse("operations:operation_detail", args=[op.pk]), **HX).content.decode()
    assert "3 of 8 workloads evicted" in detail and 'aria-valuetext="3 of 8"' in detail
    assert 'aria-valuenow="38"' in detail and "progress-bar-animated" in detail
    listing = client.get(reverse("operations:operation_list")).content.decode()
    assert "3 of 8 workloads evicted" in listing


def test_runner_counts_steps(personas):
    from apps.operations.runner import OperationHandler

    op = Operation.objects.create(kind="test.steps", tenant=personas.a, status="running")
    OperationHandler(op).set_steps(2, 8, "pods evicted")
    op.refresh_from_db()
    assert (op.steps_done, op.steps_total, op.steps_label, op.progress) == (2, 8, "pods evicted", 25.0)
    OperationHandler(op).set_steps(9, 8, "pods evicted")  # never past 100 %
    op.refresh_from_db()
    assert op.progress == 100.0


def test_incident_board_polls_and_says_what_next(personas, client):
    client.force_login(fresh(personas.oncall))
    url = reverse("health:incident_list")
    body = client.get(url).content.decode()
    assert 'hx-trigger="every 15s"' in body and 'data-testid="empty-state"' in body
    assert "New ones appear here within one telemetry scrape" in body
    filtered = client.get(url, {"severity": "fatal"}).content.decode()
    assert "Nothing matches these filters." in filtered and '<a href="?">Reset the filters</a>' in filtered


def test_empty_lists_point_to_the_next_step(personas, client):
    client.force_login(fresh(personas.platform_admin))
    workloads = client.get(reverse("workloads:workload_list")).content.decode()
    assert "No workloads yet." in workloads and f'href="{reverse("workloads:workload_submit")}"' in workloads
    assert "hx-trigger" not in workloads  # nothing on the page can change
    nodes = client.get(reverse("fleet:node_list")).content.decode()
    assert "Add a cluster and sync its inventory" in nodes and f'href="{reverse("fleet:cluster_list")}"' in nodes


def test_token_revoke_asks_first_and_names_the_impact(personas, client):
    client.force_login(fresh(personas.tenant_admin_a))
    token = personas.token_a
    body = client.get(reverse("accounts:tokens")).content.decode()
    modal = f'id="revoke-token-{token.pk}"'
    assert modal in body
    assert f'data-bs-target="#revoke-token-{token.pk}"' in body  # the row's button only opens the dialog
    assert "Revoke token ci of ci-a?" in body
    assert f"Every request that sends {token.prefix}… (acting as ci-a) gets 401 from now on." in body
    assert f'action="{reverse("accounts:token_revoke", args=[token.pk])}"' in body
    # The dialog's form is the one that posts; it works as before.
    response = client.post(reverse("accounts:token_revoke", args=[token.pk]), {"reason": "rotated"})
    assert response.status_code == 302
    token.refresh_from_db()
    assert token.revoked_at is not None


def test_membership_revoke_names_the_user_role_and_tenant(personas, client):
    client.force_login(fresh(personas.tenant_admin_a))
    body = client.get(reverse("accounts:memberships"), {"user": "member-a"}).content.decode()
    assert "Revoke member-a's role?" in body
    assert "member-a loses the role member on Org A and its teams at once" in body


def test_detail_pages_have_breadcrumbs_titles_and_a_skip_link(personas, client):
    op = Operation.objects.create(kind="fleet.sync", tenant=personas.a, target_label="sim-a")
    client.force_login(fresh(personas.member_a))
    body = client.get(reverse("operations:operation_detail", args=[op.pk])).content.decode()
    assert '<a class="visually-hidden-focusable skip-link" href="#main"' in body and '<main id="main"' in body
    assert body.index("skip-link") < body.index("<nav")  # the first thing Tab reaches
    crumbs = body[body.index('data-testid="breadcrumbs"') :]
    assert f'<a href="{reverse("operations:operation_list")}">Operations</a>' in crumbs
    assert f'aria-current="page">Operation #{op.pk}</li>' in crumbs
    assert f"<title>Operation #{op.pk} · fleet.sync sim-a · GPU console</title>" in body
