"""Which URLs an endpoint may have: http(s) only; link-local and metadata addresses refused unless a
setting allows them; loopback and private addresses refused unless another one does."""

from __future__ import annotations

import pytest

from webhooks import targets
from webhooks.errors import TargetRefusedError

SAFE = targets.Policy()
PRIVATE_OK = targets.Policy(allow_private=True)
LINK_LOCAL_OK = targets.Policy(allow_link_local=True)


@pytest.mark.parametrize(("url", "says"), [
    ("ftp://example.com/hook", "only http and https"),
    ("file:///etc/passwd", "only http and https"),
    ("javascript:alert(1)", "only http and https"),
    ("http://user:pw@93.184.216.34/hook", "credentials"),
    ("http:///nohost", "names no host"),
    ("http://93.184.216.34:99999/", "not a valid URL"),
    ("http://93.184.216.34/a b", "printable"),
    ("", "required"),
    ("http://169.254.169.254/latest/meta-data/", "link-local or cloud metadata"),
    ("http://169.254.10.1/", "link-local or cloud metadata"),
    ("http://[fe80::1]/", "link-local or cloud metadata"),
    ("http://[fd00:ec2::254]/", "link-local or cloud metadata"),
    ("http://[::ffff:169.254.169.254]/", "link-local or cloud metadata"),
    ("http://100.100.100.200/", "link-local or cloud metadata"),
    ("http://metadata.google.internal/computeMetadata/v1/", "cloud metadata service"),
    ("http://127.0.0.1:8080/hook", "loopback or private"),
    ("http://localhost/hook", "loopback or private"),
    ("http://10.1.2.3/hook", "loopback or private"),
    ("http://192.168.1.10/hook", "loopback or private"),
    ("http://[::1]/hook", "loopback or private"),
    ("http://[fd12:3456::1]/hook", "loopback or private"),
    ("http://0.0.0.0/hook", "unspecified"),
    ("http://224.0.0.1/hook", "multicast"),
    ("http://240.0.0.1/hook", "reserved"),
])
def test_refused_by_default_saying_why(url, says):
    with pytest.raises(TargetRefusedError) as refused:
        targets.check(url, SAFE)
    assert says in str(refused.value) and "?" not in str(refused.value)


def test_a_public_address_is_allowed_and_pinned():
    target = targets.check("https://93.184.216.34/hooks?token=x", SAFE)
    assert (target.scheme, target.host, target.port, str(target.address)) == ("https", "93.184.216.34", 443, "93.184.216.34")


def test_loopback_and_private_need_their_setting_and_link_local_stays_refused():
    assert str(targets.check("http://127.0.0.1:9/hook", PRIVATE_OK).address) == "127.0.0.1"
    assert targets.check("http://10.1.2.3/hook", PRIVATE_OK).port == 80
    with pytest.raises(TargetRefusedError, match="link-local"):
        targets.check("http://169.254.169.254/", PRIVATE_OK)


def test_link_local_and_metadata_need_their_own_setting():
    assert str(targets.check("http://169.254.169.254/", LINK_LOCAL_OK).address) == "169.254.169.254"
    assert targets.check("http://[fe80::1]/", LINK_LOCAL_OK).address.version == 6
    with pytest.raises(TargetRefusedError, match="loopback or private"):
        targets.check("http://127.0.0.1/", LINK_LOCAL_OK)


def test_an_unresolvable_host_is_refused():
    with pytest.raises(TargetRefusedError, match="does not resolve"):
        targets.check("https://no-such-host.invalid/hook", PRIVATE_OK)
