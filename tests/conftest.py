"""Every test gets a cache directory of its own, so that no test reads another's cache or the user's."""

import pytest


@pytest.fixture(autouse=True)
def _private_cache_home(tmp_path_factory, monkeypatch):
    monkeypatch.setenv("OFFLINT_CACHE_DIR", str(tmp_path_factory.mktemp("offlint-cache")))
