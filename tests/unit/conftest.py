"""Fixtures for the SDK unit tests (a real HTTP receiver, a run factory)."""

from sdk_receiver import make_run, receiver  # noqa: F401 - re-exported as fixtures
