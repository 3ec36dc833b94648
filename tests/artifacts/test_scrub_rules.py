"""The scrubber on realistic text: what is caught and what is kept (rules in runcast/wire/scrub.py)."""

from __future__ import annotations

import pytest
from runcast.wire.scrub import scrub, scrub_counts, scrub_credentials, scrub_tree

CAUGHT = {
    "visa spaced": ("pay with 4111 1111 1111 1111 today", "pay with [CARD] today"),
    "mastercard dashed": ("card 5555-5555-5555-4444.", "card [CARD]."),
    "amex plain": ("amex 378282246310005", "amex [CARD]"),
    "ipv4 bare": ("ssh root@ 10.1.2.3 now", "ssh root@ [IPV4] now"),
    "ipv4 in url": ("http://192.168.0.10:8080/x", "http://[IPV4]:8080/x"),
    "ipv6": ("bind 2001:db8::1 please", "bind [IPV6] please"),
    "email": ("write to a.b+c@mail.example.co.uk!", "write to [EMAIL]!"),
    "phone intl": ("call +49 30 901820", "call [PHONE]"),
    "github token": ("token ghp_abcdefghijklmnopqrstuvwxyz0123456789", "token [SECRET]"),
    "hf token": ("HF: hf_abcdefghijklmnopqrstuvwxyzABCDEFGH", "HF: [SECRET]"),
    "aws key": ("AKIAIOSFODNN7EXAMPLE", "[SECRET]"),
    "assigned secret": ('api_key="s3cr3t-value-123"', 'api_key="[SECRET]"'),
}

KEPT = [
    "Released on 2024-03-05 at 12:30:45 (05/03/2024).",
    "step 120000, tokens_seen 491520000, lr 3e-4, loss 2.3456",
    "epoch ms 1709641845123 and ns 1709641845123456789",
    "python 3.11.9 and version 1.2.3.4 and v10.0.0.1 and torch==2.3.1.0, release: 4.3.2.1",
    "order number 4111111111111112 fails the Luhn check",
    "ISBN 978-0-13-110362-7, page 123-456",
    "matrix 1024x1024, 16 layers, 8 heads",
]


@pytest.mark.parametrize("name", sorted(CAUGHT))
def test_caught(name):
    text, expected = CAUGHT[name]
    assert scrub(text) == expected


@pytest.mark.parametrize("text", KEPT)
def test_kept(text):
    assert scrub(text) == text


def test_bare_four_part_number_is_an_address():
    assert scrub("from 1.2.3.4 to") == "from [IPV4] to"


def test_counts():
    _, counts = scrub_counts("a@b.io, c@d.io, 4111 1111 1111 1111")
    assert counts == {"EMAIL": 2, "CARD": 1}


def test_credentials_only_keeps_code():
    text = 'x = "9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08"  # 10.0.0.1 a@b.io\ntoken = "hunter2hunter2"'
    out, counts = scrub_credentials(text)
    assert out == 'x = "9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08"  # 10.0.0.1 a@b.io\ntoken = "[SECRET]"'
    assert counts == {"SECRET": 1}


def test_tree_keeps_digests_and_numbers():
    tree = {"sha256": "ab" * 32, "n": 5, "x": ["mail me@x.org", {"k": "10.0.0.1"}], "short": "abcdef12" * 4}
    out, counts = scrub_tree(tree)
    assert out == {"sha256": "ab" * 32, "n": 5, "x": ["mail [EMAIL]", {"k": "[IPV4]"}], "short": "[SECRET]"}
    assert counts == {"EMAIL": 1, "IPV4": 1, "SECRET": 1}
