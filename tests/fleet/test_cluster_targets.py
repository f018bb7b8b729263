"""A cluster's deployment targets (`inference_target`, `training_target`, `trainjob_runtime`: docs/targets.md) are
connection settings, checked where every setting is: the API and the cluster form refuse what no renderer can use,
and a cluster without them keeps rendering what it did before."""

from __future__ import annotations

import pytest
from django.urls import reverse

from apps.fleet.models import Cluster
from tests.utils.personas import fresh

K8S = {"api_url": "https://k8s.example:6443"}


def post_cluster(api, personas, connection: dict):
    body = {"name": "c1", "kind": "kubernetes", "connection": connection}
    return api(fresh(personas.platform_admin)).post("/api/v1/clusters/", body, format="json")


@pytest.mark.parametrize(
    ("settings", "text"),
    [
        ({"inference_target": "knative"}, "inference_target: 'knative' is not one of deployment, lws, kserve"),
        ({"queueing": "volcano", "training_target": "trainjob"}, "no Volcano pod-group policy"),
        ({"training_target": "volcano"}, "does not work with queueing 'kueue'"),
    ],
)
def test_the_api_refuses_targets_no_renderer_can_use(personas, api, settings, text):
    response = post_cluster(api, personas, {**K8S, **settings})
    assert response.status_code == 400, response.content
    assert text in response.json()["fields"]["connection"][0]
    assert not Cluster.objects.filter(name="c1").exists()


def test_the_api_takes_valid_targets_and_leaves_them_out_by_default(personas, api):
    response = post_cluster(
        api, personas, {**K8S, "inference_target": "kserve", "training_target": "trainjob", "trainjob_runtime": "t"}
    )
    assert response.status_code == 201, response.content
    assert Cluster.objects.get(name="c1").connection["training_target"] == "trainjob"


def test_the_cluster_form_says_what_is_wrong_with_a_target(personas, client):
    client.force_login(fresh(personas.platform_admin))
    page = client.post(
        reverse("fleet:cluster_list"),
        {"name": "c1", "kind": "kubernetes", "connection": '{"inference_target": "kserv"}'},
    )
    assert page.status_code == 200
    assert "inference_target: &#x27;kserv&#x27; is not one of deployment, lws, kserve" in page.content.decode()
    assert not Cluster.objects.filter(name="c1").exists()
