"""Local accounts' passwords: argon2id through argon2-cffi's ``PasswordHasher`` (its defaults,
RFC 9106's second recommended profile: 64 MiB, 3 passes, 4 lanes). The stored string carries
its parameters, so a later change of them still verifies old hashes (and ``needs_rehash`` says
when to store a new one)."""

from __future__ import annotations

from argon2 import PasswordHasher
from argon2.exceptions import InvalidHashError, VerificationError

_HASHER = PasswordHasher()
# Verified when the name is unknown, so that a wrong name costs what a wrong password does: a
# hash made with the hasher's parameters (tests/api/test_people.py checks that they still
# are), written here rather than made at import, which cost every server and CLI process 0.2 s.
_DUMMY = "$argon2id$v=19$m=65536,t=3,p=4$kzHtrnVYcrZ+k2kzc0qafA$KP/wRg9SyoFGhsUhKDn+cmAHlOGljbCzGk5WFIIPw48"

MIN_LENGTH = 8
MAX_LENGTH = 1000


def hash_password(password: str) -> str:
    """The argon2id hash to store for ``password``."""
    return _HASHER.hash(password)


def verify(stored: str | None, password: str) -> bool:
    """Whether ``password`` matches ``stored``; with ``stored`` None the same work is done, then False."""
    try:
        return _HASHER.verify(stored or _DUMMY, password) and stored is not None
    except (VerificationError, InvalidHashError):
        return False


def needs_rehash(stored: str) -> bool:
    """Whether ``stored`` was made with other parameters than today's."""
    return _HASHER.check_needs_rehash(stored)
