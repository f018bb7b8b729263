"""/healthz and /readyz, with a real broker that answers and one that does not."""

from console.celery import app


def test_healthz_and_readyz(fleet, client):
    assert client.get("/healthz").json() == {"status": "ok"}
    body = client.get("/readyz").json()
    assert body["status"] == "ready"
    assert {c["name"]: c["ok"] for c in body["checks"]} == {"database": True, "broker": True}
    assert body["clusters"][0]["name"] == "sim" and body["clusters"][0]["status"] == "ok"


def test_readyz_names_a_broker_that_does_not_answer(db, client, monkeypatch):
    monkeypatch.setenv("CELERY_BROKER_URL", "redis://127.0.0.1:1/0")  # nothing listens on port 1
    assert app.conf.broker_write_url == "redis://127.0.0.1:1/0"
    response = client.get("/readyz")
    assert response.status_code == 503
    checks = {c["name"]: c for c in response.json()["checks"]}
    assert checks["database"]["ok"] and not checks["broker"]["ok"]
    assert "Error" in checks["broker"]["error"] or "refused" in checks["broker"]["error"].lower()
