"""Scrub personal data and secrets from text before it is published.

Used for the sample previews in a dataset manifest: a broadcast is public, so text
shown from the training data must not carry e-mail addresses, phone numbers, IP
addresses or credentials. Each match is replaced by a bracketed tag::

    >>> scrub("mail ops@example.org from 10.0.0.7")
    'mail [EMAIL] from [IPV4]'

The rules (``RULES``, applied in this order) err on the side of scrubbing: a version
string shaped like an IPv4 address is scrubbed too. Standard library only.
"""

from __future__ import annotations

import ipaddress
import re
from collections import Counter
from collections.abc import Callable

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
    ("IPV4", _IPV4, None),
    ("PHONE", _PHONE, _is_phone),
    ("SECRET", _LONG_TOKEN, _is_random_token),
]

RULE_DESCRIPTIONS = {
    "EMAIL": "e-mail addresses",
    "PHONE": "phone numbers with 7-15 digits (+country code, (NNN) NNN-NNNN, NNN-NNN-NNNN)",
    "IPV4": "IPv4 addresses",
    "IPV6": "IPv6 addresses with at least two groups",
    "SECRET": "API-key-like strings: vendor-prefixed tokens, values assigned to key/token/password names, "
    "32+ character random-looking tokens",
}


def scrub_counts(text: str) -> tuple[str, Counter[str]]:
    """The text with every match replaced by ``[TAG]``, and how many of each tag."""
    counts: Counter[str] = Counter()
    for tag, pattern, check in RULES:

        def replace(m: re.Match[str], tag: str = tag, check=check) -> str:
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
