"""Shared by the game-server tests: a TestClient that fails the test on any 5xx."""

from fastapi.testclient import TestClient


class CheckedClient(TestClient):
    """A TestClient that fails the test on any 5xx: bad input must get a 4xx with a message."""

    def request(self, *args, **kwargs):
        resp = super().request(*args, **kwargs)
        assert resp.status_code < 500, (resp.status_code, resp.text[:500])
        return resp
