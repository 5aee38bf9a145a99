"""Start-up refusals: auth off beyond loopback, production without a key secret, read-only
without its role; the loud banner when auth is off."""

import pytest

from rcll.access import deployment
from rcll.access.deployment import DeploymentError
from rcll.config import Settings


def test_auth_off_only_on_loopback(tmp_path):
    warnings = deployment.check(Settings(state_dir=tmp_path, auth=False, api_host="127.0.0.1"))
    assert any("AUTHENTICATION IS DISABLED" in w for w in warnings)
    assert deployment.check(Settings(auth=False, api_host="::1"))
    with pytest.raises(DeploymentError, match="loopback"):
        deployment.check(Settings(auth=False, api_host="0.0.0.0"))
    with pytest.raises(DeploymentError):
        deployment.check(Settings(auth=False, api_host="10.1.2.3"))


def test_auth_on_beyond_loopback_needs_key_secret():
    with pytest.raises(DeploymentError, match="RCLL_KEY_SECRET"):
        deployment.check(Settings(api_host="0.0.0.0"))
    assert deployment.check(Settings(api_host="0.0.0.0", key_secret="k" * 32)) == []
    with pytest.raises(DeploymentError, match="RCLL_ADMIN_KEY"):
        deployment.check(Settings(api_host="0.0.0.0", key_secret="k" * 32, admin_key="short"))


def test_read_only_needs_select_only_role():
    with pytest.raises(DeploymentError, match="READONLY_DATABASE_URL"):
        deployment.check(Settings(read_only=True))
    s = Settings(read_only=True, readonly_database_url="postgresql://r@127.0.0.1/x")
    assert s.activation is False   # read-only turns activation off
    deployment.check(s)


def test_create_app_refuses_auth_off_beyond_loopback(services):
    from api.app import create_app
    from rcll.bootstrap import Services

    svc = Services(services.settings.model_copy(update={"auth": False, "api_host": "0.0.0.0"}))
    with pytest.raises(DeploymentError):
        create_app(services=svc, enqueue=lambda *a: None)


def test_dev_stack_api_env_turns_auth_off_unless_set(monkeypatch):
    from rcll.dev.stack import dev_api_env

    monkeypatch.delenv("RCLL_AUTH", raising=False)
    assert dev_api_env({"RCLL_AUTH": "True"})["RCLL_AUTH"] == "off"
    monkeypatch.setenv("RCLL_AUTH", "on")
    assert dev_api_env({"RCLL_AUTH": "True"})["RCLL_AUTH"] == "on"
