"""Inventory by watch (issue 23 part 6): after the first list, syncs read only the watch events since the last one.

The first group tests the fake API server's watch against the API concepts page
(https://kubernetes.io/docs/reference/using-api/api-concepts/#efficient-detection-of-changes, #watch-bookmarks);
the rest the console's use of it through `sync_inventory`.
"""

from __future__ import annotations

import json
import time

import pytest
import urllib3

from apps.backends.kubernetes.backend import KubernetesBackend
from apps.fleet.models import Cluster, Gpu, Node
from apps.fleet.services import sync_inventory
from tests.backends.kubernetes.conftest import make_cluster

CONSOLE = {"app.kubernetes.io/managed-by": "gpu-console"}
http = urllib3.PoolManager()


def events(fake, path: str, **query: str) -> list[dict]:
    """Every line of a watch stream, until the server ends it (`timeoutSeconds`)."""
    query.setdefault("timeoutSeconds", "1")
    url = fake.url + path + "?" + "&".join(f"{k}={v}" for k, v in {"watch": "1", **query}.items())
    answer = http.request("GET", url, preload_content=False)
    assert answer.status == 200 and answer.headers["Content-Type"] == "application/json"
    assert answer.headers.get("Transfer-Encoding") == "chunked"
    data = b"".join(answer.read_chunked())
    return [json.loads(line) for line in data.splitlines() if line.strip()]


def list_rv(fake, path: str, **query: str) -> str:
    url = fake.url + path + ("?" + "&".join(f"{k}={v}" for k, v in query.items()) if query else "")
    return json.loads(http.request("GET", url).data)["metadata"]["resourceVersion"]


def relabel(fake, name: str, **labels: str) -> None:
    with fake.lock:
        nodes = fake.resource("", "v1", "nodes")
        node = fake.store.get(nodes, "", name)
        node["metadata"]["labels"].update(labels)
        fake.store.put(nodes, node)


def finish(fake, ns: str, name: str) -> None:
    with fake.lock:
        pods = fake.resource("", "v1", "pods")
        pod = fake.store.get(pods, ns, name)
        pod["status"]["phase"] = "Succeeded"
        fake.store.put(pods, pod)


def delete(fake, plural: str, name: str, ns: str = "") -> None:
    with fake.lock:
        fake.store.remove(fake.resource("", "v1", plural), ns, name)


# --- the fake's watch, from the docs -----------------------------------------------------------------------


def test_the_fakes_watch_streams_changes_after_a_lists_resource_version(fake):
    fake.add_node("gpu-00")
    fake.add_node("gpu-01")
    rv = list_rv(fake, "/api/v1/nodes")
    fake.add_node("gpu-02")
    relabel(fake, "gpu-00", rack="r1")
    delete(fake, "nodes", "gpu-01")
    seen = events(fake, "/api/v1/nodes", resourceVersion=rv)
    assert [(e["type"], e["object"]["metadata"]["name"]) for e in seen] == [
        ("ADDED", "gpu-02"),
        ("MODIFIED", "gpu-00"),
        ("DELETED", "gpu-01"),
    ]
    versions = [int(e["object"]["metadata"]["resourceVersion"]) for e in seen]
    assert versions == sorted(versions) and versions[0] > int(rv)
    assert seen[1]["object"]["metadata"]["labels"]["rack"] == "r1"
    # Without a resourceVersion: the objects there are, as ADDED events, then the changes.
    assert {e["object"]["metadata"]["name"] for e in events(fake, "/api/v1/nodes")} == {"gpu-00", "gpu-02"}


def test_the_fakes_watch_ends_after_timeout_seconds_and_sends_changes_made_while_open(fake):
    rv = list_rv(fake, "/api/v1/nodes")
    started = time.monotonic()
    url = f"{fake.url}/api/v1/nodes?watch=1&resourceVersion={rv}&timeoutSeconds=1"
    answer = http.request("GET", url, preload_content=False)
    fake.add_node("late")
    lines = [json.loads(line) for line in b"".join(answer.read_chunked()).splitlines() if line.strip()]
    assert [e["object"]["metadata"]["name"] for e in lines] == ["late"]
    assert 0.9 <= time.monotonic() - started < 5


def test_the_fakes_bookmarks_only_when_asked_and_410_after_compaction(fake):
    fake.add_node("gpu-00")
    rv = list_rv(fake, "/api/v1/nodes")
    fake.add_namespace("team-a")  # changes elsewhere move the resourceVersion on
    assert events(fake, "/api/v1/nodes", resourceVersion=rv) == []
    marks = events(fake, "/api/v1/nodes", resourceVersion=rv, allowWatchBookmarks="true")
    assert marks == [
        {
            "type": "BOOKMARK",
            "object": {"kind": "Node", "apiVersion": "v1", "metadata": {"resourceVersion": str(fake.store.rv)}},
        }
    ]
    fake.compact()
    (gone,) = events(fake, "/api/v1/nodes", resourceVersion=rv)
    assert gone["type"] == "ERROR"
    assert gone["object"]["code"] == 410 and gone["object"]["reason"] == "Expired"
    assert gone["object"]["message"].startswith(f"too old resource version: {rv}")
    # The bookmark's resourceVersion is still good to watch from.
    mark = marks[0]["object"]["metadata"]["resourceVersion"]
    assert events(fake, "/api/v1/nodes", resourceVersion=mark) == []


def test_the_fakes_filtered_watch_sends_objects_leaving_the_selection_as_deleted(fake):
    fake.add_node("gpu-00")
    fake.add_namespace("team-a")
    fake.add_pod("p-0", "team-a", "gpu-00", gpus=1)
    selector = "spec.nodeName!=,status.phase!=Succeeded,status.phase!=Failed"
    rv = list_rv(fake, "/api/v1/pods", fieldSelector=selector)
    finish(fake, "team-a", "p-0")
    fake.add_pod("pending", "team-a", gpus=1)  # not placed: not in the selection
    seen = events(fake, "/api/v1/pods", resourceVersion=rv, fieldSelector=selector)
    assert [(e["type"], e["object"]["metadata"]["name"], e["object"]["status"]["phase"]) for e in seen] == [
        ("DELETED", "p-0", "Succeeded")
    ]


# --- the console's inventory by watch ----------------------------------------------------------------------


def seed(fake, nodes: int = 4) -> None:
    fake.add_namespace("team-a")
    for i in range(nodes):
        fake.add_node(f"gpu-{i:02d}", gpus=8, labels={"gpu-console/pool": "h100"})
    fake.add_pod("train-1-0", "team-a", "gpu-00", gpus=8, labels={**CONSOLE, "job-name": "train-1"})


def watches(fake, resource: str) -> list:
    return [r for r in fake.requests_to("GET", f"/api/v1/{resource}") if r.query.get("watch") == "1"]


def lists(fake, resource: str) -> list:
    return [r for r in fake.requests_to("GET", f"/api/v1/{resource}") if "watch" not in r.query]


@pytest.fixture
def synced(db, fake):
    seed(fake)
    cluster = make_cluster(fake, watch_idle_s=0.05)
    first = sync_inventory(cluster.pk)
    assert first.ok and first.added == 4, first.error
    cluster.refresh_from_db()
    assert cluster.inventory_cursor["nodes"] and cluster.inventory_cursor["pods"]
    fake.reset_requests()
    return cluster


def test_an_unchanged_resync_reads_two_quiet_watches_and_writes_nothing(synced, fake, django_assert_max_num_queries):
    before = dict(Node.objects.filter(cluster=synced).values_list("name", "last_seen_at"))
    with django_assert_max_num_queries(8):
        result = sync_inventory(synced.pk)
    assert result.ok and (result.nodes, result.unchanged, result.updated) == (4, 4, 0)
    assert len(watches(fake, "nodes")) == 1 and len(watches(fake, "pods")) == 1
    assert lists(fake, "nodes") == [] and lists(fake, "pods") == []
    assert watches(fake, "nodes")[0].query["allowWatchBookmarks"] == "true"
    assert dict(Node.objects.filter(cluster=synced).values_list("name", "last_seen_at")) == before


def test_node_added_changed_and_deleted_by_watch_events(synced, fake):
    before = dict(Node.objects.filter(cluster=synced).values_list("name", "last_seen_at"))
    fake.add_node("gpu-09", gpus=4, labels={"gpu-console/pool": "h100"})
    relabel(fake, "gpu-01", **{"gpu-console/rack": "r7"})
    delete(fake, "nodes", "gpu-02")
    result = sync_inventory(synced.pk)
    assert result.ok, result.error
    assert (result.added, result.updated, result.vanished, result.nodes) == (1, 1, 1, 4)
    assert lists(fake, "nodes") == []  # no relist
    rows = {n.name: n for n in Node.objects.filter(cluster=synced)}
    assert rows["gpu-09"].gpu_count == 4 and Gpu.objects.filter(node=rows["gpu-09"]).count() == 4
    assert rows["gpu-01"].rack == "r7"
    assert rows["gpu-02"].state == "vanished"
    # Only the changed rows were written; the others keep their last_seen_at.
    assert rows["gpu-03"].last_seen_at == before["gpu-03"] and rows["gpu-00"].last_seen_at == before["gpu-00"]
    assert rows["gpu-01"].last_seen_at > before["gpu-01"]
    # And the next sync has nothing more to read.
    again = sync_inventory(synced.pk)
    assert again.ok and (again.added, again.updated, again.vanished) == (0, 0, 0)


def test_pod_changes_move_the_nodes_allocation(synced, fake):
    fake.add_pod("serve-2-0", "team-a", "gpu-03", gpus=2, labels={**CONSOLE, "job-name": "serve-2"})
    finish(fake, "team-a", "train-1-0")
    fake.add_pod("pending-0", "team-a", gpus=1)  # not placed: changes no node
    result = sync_inventory(synced.pk)
    assert result.ok and result.updated == 2, result
    rows = {n.name: n for n in Node.objects.filter(cluster=synced)}
    assert rows["gpu-00"].gpu_allocated == 0 and rows["gpu-03"].gpu_allocated == 2
    assert set(Gpu.objects.filter(node=rows["gpu-03"]).values_list("allocated_to", flat=True)) == {"serve-2", ""}
    # The same answer a full list gives.
    full = {n.name: n for n in KubernetesBackend(synced).inventory().nodes}
    assert sum(1 for g in full["gpu-03"].gpus if g.allocated_to) == 2
    assert not any(g.allocated_to for g in full["gpu-00"].gpus)


def test_a_410_gone_lists_again_and_watches_from_the_new_list(synced, fake):
    relabel(fake, "gpu-01", **{"gpu-console/rack": "r7"})
    delete(fake, "nodes", "gpu-03")
    fake.compact()  # the server forgot the history the cursor points into
    result = sync_inventory(synced.pk)
    assert result.ok and (result.nodes, result.updated, result.vanished) == (3, 1, 1), result
    assert len(lists(fake, "nodes")) == 1 and len(lists(fake, "pods")) == 1
    synced.refresh_from_db()
    assert int(synced.inventory_cursor["nodes"]) == fake.store.rv
    assert Node.objects.get(cluster=synced, name="gpu-01").rack == "r7"
    fake.reset_requests()
    assert sync_inventory(synced.pk).ok
    assert lists(fake, "nodes") == [] and len(watches(fake, "nodes")) == 1


def test_bookmarks_advance_the_cursor_past_other_resources_changes(synced, fake):
    old = synced.inventory_cursor["nodes"]
    for i in range(3):
        fake.add_namespace(f"other-{i}")
    assert sync_inventory(synced.pk).ok
    synced.refresh_from_db()
    assert int(synced.inventory_cursor["nodes"]) == fake.store.rv > int(old)
    assert int(synced.inventory_cursor["pods"]) == fake.store.rv
    # Compaction of the history before the bookmark costs no relist.
    fake.compact()
    fake.reset_requests()
    assert sync_inventory(synced.pk).ok
    assert lists(fake, "nodes") == []


def test_a_dropped_watch_connection_resumes_from_the_last_event(synced, fake):
    for name in ("gpu-00", "gpu-01", "gpu-02"):
        relabel(fake, name, **{"gpu-console/rack": "r9"})
    fake.drop_watch_after = 1
    result = sync_inventory(synced.pk)
    assert result.ok and result.updated == 3, result
    node_watches = watches(fake, "nodes")
    assert len(node_watches) == 2
    assert int(node_watches[1].query["resourceVersion"]) > int(node_watches[0].query["resourceVersion"])
    assert set(Node.objects.filter(cluster=synced, rack="r9").values_list("name", flat=True)) == {
        "gpu-00",
        "gpu-01",
        "gpu-02",
    }


def test_a_failed_write_keeps_the_cursor_so_the_events_are_read_again(synced, fake, monkeypatch):
    relabel(fake, "gpu-01", **{"gpu-console/rack": "r7"})
    cursor = dict(synced.inventory_cursor)
    from apps.fleet import services

    def boom(*args, **kwargs):
        raise RuntimeError("database went away")

    monkeypatch.setattr(services, "_sync_pool_taints", boom)
    with pytest.raises(RuntimeError):
        sync_inventory(synced.pk)
    synced.refresh_from_db()
    assert synced.inventory_cursor == cursor
    monkeypatch.undo()
    Cluster.objects.filter(pk=synced.pk).update(sync_started_at=None)
    assert sync_inventory(synced.pk).updated == 1
    assert Node.objects.get(cluster=synced, name="gpu-01").rack == "r7"


def test_watch_off_or_an_old_cursor_lists_everything(synced, fake):
    Cluster.objects.filter(pk=synced.pk).update(connection={**synced.connection, "inventory_relist_s": 0})
    assert sync_inventory(synced.pk).ok
    assert len(lists(fake, "nodes")) == 1 and watches(fake, "nodes") == []
    fake.reset_requests()
    Cluster.objects.filter(pk=synced.pk).update(connection={**synced.connection, "inventory_watch": False})
    assert sync_inventory(synced.pk).ok
    assert len(lists(fake, "nodes")) == 1 and watches(fake, "nodes") == []


def test_paged_lists_ask_for_the_next_page_while_parsing_and_miss_nothing(db, fake):
    for i in range(7):
        fake.add_node(f"gpu-{i:02d}")
    backend = KubernetesBackend(make_cluster(fake, page_size=2))
    fake.reset_requests()
    items, version = backend.api.list_at("/api/v1/nodes", "list nodes")
    assert [n["metadata"]["name"] for n in items] == [f"gpu-{i:02d}" for i in range(7)]
    assert version == str(fake.store.rv)
    assert [r.query.get("continue", "") for r in lists(fake, "nodes")] == ["", "/gpu-01", "/gpu-03", "/gpu-05"]


def test_the_continue_token_is_read_from_the_answers_head_only():
    from apps.backends.kubernetes.api import peek_continue

    head = b'{"kind":"PodList","apiVersion":"v1","metadata":{"resourceVersion":"12","continue":"eyJ2"},"items":[]}'
    assert peek_continue(head) == "eyJ2"
    assert peek_continue(b'{"kind":"PodList","metadata":{"resourceVersion":"12"},"items":[]}') == ""
    # metadata after the items (not how the API server writes it): unknown, the parsed answer decides
    assert peek_continue(b'{"items":[{"metadata":{"continue":"no"}}],"metadata":{"continue":"q"}}') is None


def test_an_account_without_the_watch_verb_lists_as_before(synced, fake):
    relabel(fake, "gpu-01", **{"gpu-console/rack": "r7"})
    fake.fail(403, times=1, method="GET", path="/api/v1/nodes", message="nodes is forbidden: cannot watch")
    result = sync_inventory(synced.pk)
    assert result.ok and result.updated == 1, result
    assert len(lists(fake, "nodes")) == 1 and len(lists(fake, "pods")) == 1
    assert Node.objects.get(cluster=synced, name="gpu-01").rack == "r7"
