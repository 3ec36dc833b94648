"""Scrub personal data and secrets from text before it is published.

Used for the sample previews in a dataset manifest: a broadcast is public, so text
shown from the training data must not carry e-mail addresses, phone numbers, IP
addresses or credentials. Each match is replaced by a bracketed tag::

    >>> scrub("mail ops@example.org from 10.0.0.7")
    'mail [EMAIL] from [IPV4]'

The rules (``RULES``, applied in this order) err on the side of scrubbing. What is
kept on purpose (tests/trainer/test_scrub.py and tests/artifacts/test_scrub_rules.py
hold the examples):

* dates and times (``2024-03-05``, ``05/03/2024``, ``12:30:45``), step and token
  counts, epoch timestamps, floats, version strings of up to three parts;
* a four-part version shaped like an IPv4 address when a version word or operator
  comes right before it (``version 1.2.3.4``, ``v1.2.3.4``, ``==1.2.3.4``,
  ``release: 10.0.0.1``); a bare ``1.2.3.4`` is scrubbed as an address;
* long digit runs that fail the Luhn check or lack a card network's prefix (card
  numbers are 13-19 digits, grouped by spaces or dashes or not, starting 2-6, Luhn-valid);
* hex digests as whole JSON values in ``scrub_tree`` (40, 64 or 128 hex digits).

``scrub_credentials`` applies only the credential rules with a recognisable shape
(vendor prefixes, ``password = ...`` assignments): for code diffs, where hashes and
addresses are part of the code. Standard library only.
"""

from __future__ import annotations

import ipaddress
import re
from collections import Counter
from collections.abc import Callable
from typing import Any

# Credentials with a recognisable vendor prefix.
_PREFIXED_KEY = re.compile(
    r"""(?<![A-Za-z0-9])(?:
        sk-(?:proj-|ant-)?[A-Za-z0-9_-]{20,}      # OpenAI / Anthropic style
      | gh[pousr]_[A-Za-z0-9]{30,}                 # GitHub tokens
      | github_pat_[A-Za-z0-9_]{30,}
      | hf_[A-Za-z0-9]{30,}                        # Hugging Face
      | rc_[A-Za-z0-9_-]{30,}                      # Runcast ingest tokens
      | xox[abprs]-[A-Za-z0-9-]{10,}               # Slack
      | AKIA[0-9A-Z]{16}                           # AWS access key id
      | AIza[0-9A-Za-z_-]{35}                      # Google API key
      | glpat-[A-Za-z0-9_-]{20,}                   # GitLab
    )""",
    re.VERBOSE,
)
# `password = "..."`, `api_key: ...`, `Authorization: Bearer ...`: keep the name, drop the value.
_ASSIGNED_SECRET = re.compile(
    r"""(?P<name>(?:api[_-]?key|secret(?:[_-]?key)?|access[_-]?token|auth[_-]?token|token|passw(?:or)?d|bearer)
         ["']?\s*(?:[:=]|\s)\s*["']?)
        (?P<value>[^\s"'<>]{8,})""",
    re.VERBOSE | re.IGNORECASE,
)
_EMAIL = re.compile(r"(?<![\w.+-])[A-Za-z0-9._%+-]+@[A-Za-z0-9-]+(?:\.[A-Za-z0-9-]+)*\.[A-Za-z]{2,}\b")
_IPV6_CANDIDATE = re.compile(r"(?<![\w:.])[0-9A-Fa-f]{0,4}(?::[0-9A-Fa-f]{0,4}){2,7}(?:%\w+)?(?![\w:])")
_IPV4 = re.compile(r"(?<![\w.])(?:(?:25[0-5]|2[0-4]\d|1\d\d|[1-9]?\d)\.){3}(?:25[0-5]|2[0-4]\d|1\d\d|[1-9]?\d)(?![\w.]|\.\d)")
# +44 20 7946 0958, +1-202-555-0143, (202) 555-0143, 202.555.0143
_PHONE = re.compile(
    r"""(?<![\w+])(?:
        \+\d{1,3}[\s.-]?(?:\(\d{1,4}\)[\s.-]?)?\d{1,4}(?:[\s.-]?\d{2,4}){1,4}
      | \(\d{3}\)\s?\d{3}[\s.-]\d{4}
      | \d{3}[.-]\d{3}[.-]\d{4}
    )(?![\w])""",
    re.VERBOSE,
)
# Payment-card-like numbers: 13-19 digits, single spaces or dashes between groups allowed.
_CARD = re.compile(r"(?<![\w.+-])[2-6]\d{3}(?:[ -]?\d){9,15}(?![\w]|[.-]\d)")
# Words or operators that make an IPv4-shaped string a version number.
_VERSION_BEFORE = re.compile(
    r"(?:\b(?:version|release|ver|build|firmware|kernel|driver|rev)\.?\s*[:=]?\s*|[=<>~!]=\s*|(?<![A-Za-z])[vV])$",
    re.IGNORECASE,
)
# Long random-looking tokens: 32+ characters mixing upper case, lower case and digits
# (base64 / base62 secrets), or 32+ hex digits with at least one letter and one digit.
_LONG_TOKEN = re.compile(r"(?<![A-Za-z0-9+/_-])[A-Za-z0-9+/_-]{32,}={0,2}(?![A-Za-z0-9+/_-])")


def _is_ipv6(match: re.Match[str]) -> bool:
    text = match.group(0).split("%")[0]
    if sum(1 for group in text.split(":") if group) < 2:  # '::1' or 'a[::2]' is not worth scrubbing
        return False
    try:
        ipaddress.IPv6Address(text)
    except ValueError:
        return False
    return True


def _is_phone(match: re.Match[str]) -> bool:
    return 7 <= sum(ch.isdigit() for ch in match.group(0)) <= 15


def _is_card(match: re.Match[str]) -> bool:
    digits = [int(ch) for ch in match.group(0) if ch.isdigit()]
    if not 13 <= len(digits) <= 19:
        return False
    total = 0
    for i, d in enumerate(reversed(digits)):  # Luhn: double every second digit from the right
        if i % 2:
            d *= 2
            if d > 9:
                d -= 9
        total += d
    return total % 10 == 0


def _is_address_not_version(match: re.Match[str]) -> bool:
    before = match.string[max(0, match.start() - 20) : match.start()]
    return _VERSION_BEFORE.search(before) is None


def _is_random_token(match: re.Match[str]) -> bool:
    token = match.group(0)
    has_digit = any(c.isdigit() for c in token)
    if re.fullmatch(r"[0-9a-fA-F]+", token):
        return has_digit and any(c.isalpha() for c in token)
    return has_digit and any(c.isupper() for c in token) and any(c.islower() for c in token)


# (tag, pattern, extra check or None); order matters: secrets and e-mails before IPs and phones.
RULES: list[tuple[str, re.Pattern[str], Callable[[re.Match[str]], bool] | None]] = [
    ("SECRET", _PREFIXED_KEY, None),
    ("SECRET", _ASSIGNED_SECRET, None),
    ("EMAIL", _EMAIL, None),
    ("IPV6", _IPV6_CANDIDATE, _is_ipv6),
    ("IPV4", _IPV4, _is_address_not_version),
    ("CARD", _CARD, _is_card),
    ("PHONE", _PHONE, _is_phone),
    ("SECRET", _LONG_TOKEN, _is_random_token),
]

RULE_DESCRIPTIONS = {
    "EMAIL": "e-mail addresses",
    "PHONE": "phone numbers with 7-15 digits (+country code, (NNN) NNN-NNNN, NNN-NNN-NNNN)",
    "IPV4": "IPv4 addresses (not four-part versions after a version word: 'version 1.2.3.4', 'v1.2.3.4')",
    "CARD": "payment-card-like numbers: 13-19 digits starting 2-6 that pass the Luhn check",
    "IPV6": "IPv6 addresses with at least two groups",
    "SECRET": "API-key-like strings: vendor-prefixed tokens, values assigned to key/token/password names, "
    "32+ character random-looking tokens",
}


# The credential rules with a recognisable shape (no long-token guessing): for code diffs.
CREDENTIAL_RULES = RULES[:2]

_DIGEST = re.compile(r"[0-9a-fA-F]{40}|[0-9a-fA-F]{64}|[0-9a-fA-F]{128}")


def scrub_counts(
    text: str, rules: list[tuple[str, re.Pattern[str], Callable[[re.Match[str]], bool] | None]] | None = None
) -> tuple[str, Counter[str]]:
    """The text with every match replaced by ``[TAG]``, and how many of each tag."""
    counts: Counter[str] = Counter()
    for tag, pattern, check in RULES if rules is None else rules:

        def replace(m: re.Match[str], tag: str = tag, pattern: re.Pattern[str] = pattern,
                    check: Callable[[re.Match[str]], bool] | None = check) -> str:
            if check is not None and not check(m):
                return m.group(0)
            counts[tag] += 1
            if "value" in pattern.groupindex:  # keep the name of an assigned secret
                return m.group("name") + f"[{tag}]"
            return f"[{tag}]"

        text = pattern.sub(replace, text)
    return text, counts


def scrub(text: str) -> str:
    """The text with personal data and secrets replaced by ``[EMAIL]``, ``[PHONE]``, ..."""
    return scrub_counts(text)[0]


def scrub_credentials(text: str) -> tuple[str, Counter[str]]:
    """Only vendor-prefixed keys and values assigned to key/token/password names, replaced by ``[SECRET]``."""
    return scrub_counts(text, CREDENTIAL_RULES)


def scrub_tree(obj: Any, counts: Counter[str] | None = None) -> tuple[Any, Counter[str]]:
    """A JSON value with every string scrubbed (dict keys and numbers are kept).

    A string that is entirely a hex digest (40, 64 or 128 hex digits: sha1, sha256,
    sha512) is kept as it is: manifests list file hashes, which are not secrets.
    """
    counts = Counter() if counts is None else counts
    if isinstance(obj, str):
        if _DIGEST.fullmatch(obj):
            return obj, counts
        out, found = scrub_counts(obj)
        counts.update(found)
        return out, counts
    if isinstance(obj, dict):
        return {k: scrub_tree(v, counts)[0] for k, v in obj.items()}, counts
    if isinstance(obj, (list, tuple)):
        return [scrub_tree(v, counts)[0] for v in obj], counts
    return obj, counts
