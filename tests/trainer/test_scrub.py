"""The scrubber on realistic text: what must go, and what must stay."""

from __future__ import annotations

from runcast.wire.scrub import scrub, scrub_counts


def test_mail_header_and_signature():
    text = (
        "From: Jane Doe <jane.doe@research-lab.example.ac.uk>\n"
        "Cc: ops+alerts@example.com\n"
        "Call me on +44 20 7946 0958 or (202) 555-0143, fax 202.555.0199.\n"
        "-- \nJane"
    )
    out, counts = scrub_counts(text)
    assert out == (
        "From: Jane Doe <[EMAIL]>\n"
        "Cc: [EMAIL]\n"
        "Call me on [PHONE] or [PHONE], fax [PHONE].\n"
        "-- \nJane"
    )
    assert counts == {"EMAIL": 2, "PHONE": 3}


def test_server_log_with_ip_addresses():
    text = (
        "2024-03-05 12:30:45 accepted connection from 192.168.10.24:51422\n"
        "upstream [2001:db8:85a3::8a2e:370:7334]:443 and fe80::1ff:fe23:4567:890a%eth0 answered\n"
        "slice a[::2] and loopback ::1 stay, so does version 3.11.7\n"
    )
    assert scrub(text) == (
        "2024-03-05 12:30:45 accepted connection from [IPV4]:51422\n"
        "upstream [[IPV6]]:443 and [IPV6] answered\n"
        "slice a[::2] and loopback ::1 stay, so does version 3.11.7\n"
    )


def test_credentials_in_config_and_shell():
    text = (
        "export OPENAI_API_KEY=sk-proj-Xy12abCDefGHijKLmnOPqrSTuv34\n"
        "git clone https://ghp_0123456789abcdefghijABCDEFGHIJklmnop@github.com/acme/repo\n"
        'aws_access_key_id = AKIAIOSFODNN7EXAMPLE\n'
        'config = {"password": "correct-horse-battery", "user": "admin"}\n'
        "curl -H 'Authorization: Bearer eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0In0.abc' host\n"
        "RUNCAST_TOKEN=rc_Zm9vYmFyYmF6cXV4cXV1eGNvcmdlZ3JhdWx0Z2FycGx5\n"
    )
    out = scrub(text)
    assert "sk-proj" not in out and "ghp_" not in out and "AKIA" not in out
    assert "correct-horse" not in out and "eyJhbGci" not in out and "rc_Zm9v" not in out
    assert 'config = {"password": "[SECRET]", "user": "admin"}' in out
    assert "https://[SECRET]@github.com/acme/repo" in out


def test_ordinary_code_and_prose_stay_untouched():
    text = (
        "def test_something_rather_long_named_with_many_parts(self):\n"
        "    self.assertEqual(divmod(7, 2), (3, 1))  # see RFC 2822, section 3.4\n"
        "The year 2024 had 366 days; call count was 1234567 in total.\n"
        "Copyright (C) 2007 Free Software Foundation, Inc. <https://fsf.org/>\n"
    )
    assert scrub(text) == text


def test_long_random_tokens_and_hex_digests():
    text = "key: 9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08 and Zx9Qw8Er7Ty6Ui5Op4As3Df2Gh1Jk0Lz"
    assert scrub(text) == "key: [SECRET] and [SECRET]"
