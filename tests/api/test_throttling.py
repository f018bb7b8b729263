"""API rate limits (issue 20: "100 bad tokens and 300 API calls in 3 s, never a 429").

The suite turns every limit off in tests/conftest.py; each test here sets the one it proves, small.
"""

from __future__ import annotations

import os
import uuid

import pytest
from django.core.cache import cache

from apps.accounts.services import issue_token
from tests.utils.personas import fresh

OFF = {"token": None, "user": None, "anon": None, "bad_token": None}


@pytest.fixture
def rates(settings):
    """Set some limits (the rest off), on a cache without another test's counts (the per-process default cache:
    never cleared once a test has pointed the cache at Redis, where that would flush the broker's database)."""
    cache.clear()

    def use(**limits: str) -> None:
        settings.API_THROTTLE_RATES = {**OFF, **limits}

    return use


def assert_throttled(response, *, json: bool = True) -> None:
    assert response.status_code == 429, response.content
    assert int(response["Retry-After"]) >= 1
    if not json:  # the Swagger UI page answers in HTML
        return
    body = response.json()
    assert set(body) == {"message", "code", "fields", "request_id"}
    assert body["code"] == "throttled" and body["fields"] == {}
    assert body["message"].startswith("Request was throttled.")


def test_default_limits_are_on_and_configurable():
    from console import settings as defaults

    assert defaults.API_THROTTLE_RATES == {
        "token": "600/minute",
        "user": "1200/minute",
        "anon": "60/minute",
        "bad_token": "30/minute",
    }


def test_each_token_has_its_own_limit(personas, api, rates):
    rates(token="3/minute")
    client = api(token=personas.token_a_raw)
    assert [client.get("/api/v1/me/").status_code for _ in range(3)] == [200] * 3
    assert_throttled(client.get("/api/v1/me/"))
    # Another token of the same user is counted on its own.
    ci = fresh(personas.ci_a)
    _, other = issue_token(fresh(personas.tenant_admin_a), user=ci, name="second", tenant=personas.a, role="member")
    assert api(token=other).get("/api/v1/me/").status_code == 200


def test_each_user_has_one_limit_over_session_and_tokens(personas, api, rates):
    rates(user="4/minute")
    member = api(fresh(personas.member_a))
    assert [member.get("/api/v1/me/").status_code for _ in range(4)] == [200] * 4
    assert_throttled(member.get("/api/v1/me/"))
    assert api(fresh(personas.member_b)).get("/api/v1/me/").status_code == 200
    # ci-a's token and a second token of ci-a share ci-a's count.
    ci = fresh(personas.ci_a)
    _, other = issue_token(fresh(personas.tenant_admin_a), user=ci, name="second", tenant=personas.a, role="member")
    assert [api(token=personas.token_a_raw).get("/api/v1/me/").status_code for _ in range(4)] == [200] * 4
    assert_throttled(api(token=other).get("/api/v1/me/"))


def test_anonymous_requests_are_limited_per_address(db, api, rates):
    rates(anon="2/minute")
    client = api()
    assert [client.get("/api/v1/docs/", REMOTE_ADDR="203.0.113.5").status_code for _ in range(2)] == [200] * 2
    assert_throttled(client.get("/api/v1/docs/", REMOTE_ADDR="203.0.113.5"), json=False)
    assert client.get("/api/v1/docs/", REMOTE_ADDR="203.0.113.6").status_code == 200


def test_the_token_exchange_is_limited_like_anonymous_requests(db, api, rates):
    rates(anon="2/minute")
    body = {
        "grant_type": "urn:ietf:params:oauth:grant-type:token-exchange",
        "subject_token": "not-a-jwt",
        "subject_token_type": "urn:ietf:params:oauth:token-type:id_token",
    }
    client = api()
    sent = [client.post("/api/v1/token-exchange/", body, format="json", REMOTE_ADDR="203.0.113.7") for _ in range(2)]
    assert [r.status_code for r in sent] == [401, 401]
    assert_throttled(client.post("/api/v1/token-exchange/", body, format="json", REMOTE_ADDR="203.0.113.7"))


def test_guessing_tokens_gets_429_after_the_bad_token_limit(personas, api, rates):
    rates(bad_token="5/minute")
    guesser = api(token="gpuc_guess")
    assert [guesser.get("/api/v1/me/").status_code for _ in range(5)] == [401] * 5
    assert_throttled(guesser.get("/api/v1/me/"))
    assert_throttled(api(token=personas.token_a_raw + "x").get("/api/v1/me/"))
    # Valid tokens are not failures: a pipeline on the same address keeps working.
    assert api(token=personas.token_a_raw).get("/api/v1/me/").status_code == 200


def test_the_client_address_behind_proxies_is_the_last_forwarded_one(db, api, rates, settings):
    settings.NUM_PROXIES = 1
    rates(anon="1/minute")
    client = api()
    proxy = {"REMOTE_ADDR": "10.0.0.1"}
    assert client.get("/api/v1/docs/", HTTP_X_FORWARDED_FOR="1.1.1.1, 203.0.113.5", **proxy).status_code == 200
    # A client cannot dodge its count by claiming another address further left.
    assert_throttled(client.get("/api/v1/docs/", HTTP_X_FORWARDED_FOR="9.9.9.9, 203.0.113.5", **proxy), json=False)
    assert client.get("/api/v1/docs/", HTTP_X_FORWARDED_FOR="203.0.113.6", **proxy).status_code == 200


def test_counts_live_in_the_shared_cache_redis_in_deployments(personas, api, rates, settings):
    """With CACHE_URL=redis://… every web process counts in the same place (the suite's Redis, a key prefix
    of its own so nothing else there is touched)."""
    url = os.environ.get("CELERY_BROKER_URL", "")
    if not url.startswith("redis://"):
        pytest.skip("needs the suite's Redis (make test sets CELERY_BROKER_URL=redis://…)")
    prefix = f"throttle-test-{uuid.uuid4().hex}"
    settings.CACHES = {
        "default": {"BACKEND": "django.core.cache.backends.redis.RedisCache", "LOCATION": url, "KEY_PREFIX": prefix}
    }
    rates(token="2/minute")
    client = api(token=personas.token_a_raw)
    assert [client.get("/api/v1/me/").status_code for _ in range(2)] == [200] * 2
    assert_throttled(client.get("/api/v1/me/"))
    assert len(cache.get(f"throttle_token_{personas.token_a.pk}")) == 2
    cache.delete(f"throttle_token_{personas.token_a.pk}")
