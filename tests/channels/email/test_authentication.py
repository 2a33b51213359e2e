"""`Authentication-Results` (read with authres): only the receiving server's verdict counts,
and only a pass for the From domain lets a mail through."""

from __future__ import annotations

import pytest

from nodmix.channels.email.authentication import AuthPolicy, check_sender
from nodmix.channels.email.mapping import parse

AUTO = AuthPolicy()
OURS = AuthPolicy(authserv_ids=frozenset({"mx.nodmix.test"}))


def _check(*results: str, policy: AuthPolicy = AUTO, domain: str = "example.org") -> str | None:
    fields = "".join(f"Authentication-Results: {r}\r\n" for r in results)
    mail = parse(f"{fields}From: ann@{domain}\r\nSubject: x\r\n\r\nhi\r\n".encode())
    return check_sender(mail, domain, policy)


@pytest.mark.parametrize(
    "result",
    [
        "mx.nodmix.test; dmarc=pass (p=reject) header.from=example.org",
        "mx.nodmix.test; dkim=pass header.d=example.org; dmarc=none header.from=example.org",
        "mx.nodmix.test; dkim=pass header.d=mail.example.org",
        "mx.nodmix.test; spf=pass smtp.mailfrom=bounce@example.org",
        "mx.nodmix.test 1;\r\n  spf=fail smtp.mailfrom=example.org;\r\n"
        "  dkim=pass header.d=example.org",
    ],
)
def test_an_aligned_pass_lets_the_mail_through(result: str) -> None:
    assert _check(result) is None
    assert _check(result, policy=OURS) is None


@pytest.mark.parametrize(
    "result",
    [
        "mx.nodmix.test; dmarc=fail (p=reject) header.from=example.org",
        "mx.nodmix.test; dmarc=fail header.from=example.org; dkim=pass header.d=example.org",
        "mx.nodmix.test; dkim=pass header.d=evil.example; spf=pass smtp.mailfrom=evil.example",
        "mx.nodmix.test; dkim=pass header.d=example.org.evil.example",
        "mx.nodmix.test; dkim=fail header.d=example.org; spf=softfail smtp.mailfrom=example.org",
        "mx.nodmix.test; none",
        "mx.nodmix.test; garbage;;",
    ],
)
def test_a_failed_or_unaligned_result_is_refused(result: str) -> None:
    assert _check(result) is not None


def test_a_forged_pass_below_the_servers_fail_does_not_count() -> None:
    forged = "mx.nodmix.test; dmarc=pass header.from=example.org"
    real = "mx.nodmix.test; dmarc=fail header.from=example.org"
    assert _check(real, forged) is not None  # the topmost field is the server's


def test_with_authserv_ids_only_those_servers_count_and_one_must_be_there() -> None:
    forged = "evil.example; dmarc=pass header.from=example.org"
    assert _check(forged, policy=OURS) == "no Authentication-Results from the receiving server"
    assert _check(policy=OURS) is not None
    assert _check(forged, "MX.nodmix.test; dmarc=pass header.from=example.org", policy=OURS) is None


def test_without_results_auto_accepts_require_refuses_and_off_never_looks() -> None:
    assert _check() is None
    assert _check(policy=AuthPolicy(mode="require")) is not None
    failing = "mx.nodmix.test; dmarc=fail header.from=example.org"
    assert _check(failing, policy=AuthPolicy(mode="off")) is None
