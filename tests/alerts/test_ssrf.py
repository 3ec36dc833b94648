"""The webhook SSRF guard refuses internal addresses unless allow-listed; never sends traffic off-host."""

from __future__ import annotations

import pytest
from runcast_server.alerts import ssrf


@pytest.mark.parametrize(
    "url",
    [
        "http://127.0.0.1/hook",
        "http://10.0.0.1/hook",
        "http://169.254.169.254/latest/meta-data/",
        "http://[::1]/hook",
        "http://localhost/hook",  # a hostname that resolves to loopback
        "http://[::ffff:127.0.0.1]/hook",  # IPv4-mapped IPv6
        "http://[::ffff:169.254.169.254]/",
        "http://[fe80::1]/",
        "http://0.0.0.0/",
        "http://224.0.0.1/",
        "http://192.168.1.1/",
        "http://100.64.0.1/",
        "http://[fd00:ec2::254]/",
        "http://2130706433/",  # 127.0.0.1 as one number
        "http://[64:ff9b::7f00:1]/",  # NAT64 of 127.0.0.1
    ],
)
def test_internal_addresses_are_refused(url):
    with pytest.raises(ssrf.Refused):
        ssrf.vet(url, "")


@pytest.mark.parametrize("url", ["ftp://example.com/", "http://user:pw@example.com/", "http:///nohost", "file:///etc/passwd"])
def test_bad_urls_are_refused(url):
    with pytest.raises(ssrf.Refused):
        ssrf.vet(url, "")


def test_allow_list_admits_only_its_ranges():
    assert str(ssrf.vet("http://127.0.0.1:9/x", "127.0.0.0/8").ip) == "127.0.0.1"
    assert str(ssrf.vet("http://localhost:9/x", "127.0.0.0/8, ::1/128").ip) in ("127.0.0.1", "::1")
    with pytest.raises(ssrf.Refused):
        ssrf.vet("http://10.0.0.1/", "127.0.0.0/8")
    with pytest.raises(ssrf.Refused):
        ssrf.vet("http://169.254.169.254/", "127.0.0.0/8")


def test_public_address_passes_without_any_traffic():
    # vetting a literal address resolves nothing and connects nowhere
    assert str(ssrf.vet("https://93.184.215.14/hook", "").ip) == "93.184.215.14"


def test_post_connects_to_the_vetted_address_with_the_original_host(monkeypatch):
    """DNS rebinding: the request goes to the IP that was vetted, whatever DNS says later."""
    from alerts.helpers import Receiver

    rec = Receiver()
    try:
        port = rec.server.server_address[1]
        target = ssrf.vet(f"http://localhost:{port}/hook", "127.0.0.0/8")
        target = ssrf.Target(url=target.url, scheme="http", host="hooks.example", port=port, ip=target.ip)
        real = ssrf.socket.getaddrinfo

        def no_dns(host, *args, **kwargs):  # numeric addresses only: no name is resolved again
            if host in ("localhost", "hooks.example"):
                pytest.fail("DNS asked again")
            return real(host, *args, **kwargs)

        monkeypatch.setattr(ssrf.socket, "getaddrinfo", no_dns)
        r = ssrf.post(target, b"{}", {"Content-Type": "application/json"}, 5)
        assert r.status_code == 200
        assert rec.requests[0]["headers"]["Host"] == f"hooks.example:{port}"
    finally:
        rec.close()
