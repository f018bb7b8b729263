"""The demo's processes may call loopback (its simulator answers on the demo's own address); nothing else does."""

from apps.dashboard.management.commands.demo import demo_environment


def test_the_demo_allows_loopback_for_its_processes(monkeypatch, tmp_path):
    monkeypatch.delenv("OUTBOUND_ALLOWED_NETWORKS", raising=False)
    env = demo_environment(tmp_path)
    assert env["OUTBOUND_ALLOWED_NETWORKS"] == "127.0.0.0/8,::1/128"
    assert env["PROMETHEUS_MULTIPROC_DIR"] == str(tmp_path)


def test_a_choice_of_the_caller_wins(monkeypatch, tmp_path):
    monkeypatch.setenv("OUTBOUND_ALLOWED_NETWORKS", "")
    assert demo_environment(tmp_path)["OUTBOUND_ALLOWED_NETWORKS"] == ""
    monkeypatch.setenv("OUTBOUND_ALLOWED_NETWORKS", "10.0.0.0/8")
    assert demo_environment(tmp_path)["OUTBOUND_ALLOWED_NETWORKS"] == "10.0.0.0/8"
