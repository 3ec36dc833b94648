"""The commands tests use the API tests' embedded server fixtures."""

from api.conftest import auth, client, seed  # noqa: F401
