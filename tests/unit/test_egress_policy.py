"""Egress policies as the operator writes them, and what a trial under one may reach: no name
resolved here leaves loopback (`localhost` is the one name a test may resolve)."""

from __future__ import annotations

import pytest

from service.domain.egress import PolicyError, parse_policies
from service.domain.job_spec import OFFLINE
from service.launch.egress import TrialEgress, trial_egress


def test_policies_are_read_by_name_and_offline_is_always_one() -> None:
    policies = parse_policies(" mirrors = PyPI.org., *.pythonhosted.org ; local=127.0.0.2:8080;")
    assert set(policies) == {OFFLINE, "mirrors", "local"}
    assert policies[OFFLINE].describe() == "nothing"
    assert policies["mirrors"].hosts == {"pypi.org", "*.pythonhosted.org"}
    assert policies["local"].exact == {("127.0.0.2", 8080)}
    assert parse_policies(None) == {OFFLINE: policies[OFFLINE]}


@pytest.mark.parametrize(
    ("text", "words"),
    [
        ("mirrors", "is not NAME=HOST"),
        ("Mirrors=pypi.org", "is not NAME=HOST"),
        ("offline=pypi.org", "offline is examhall's own policy"),
        ("m=https://pypi.org/simple", "is not a host, *.domain or host:port"),
        ("m=pypi.org:99999", "is not a host, *.domain or host:port"),
        ("m=a b", "is not a host"),
    ],
)
def test_a_policy_written_wrong_is_refused_saying_what_to_fix(text: str, words: str) -> None:
    with pytest.raises(PolicyError, match="EXAMHALL_EGRESS_POLICIES") as caught:
        parse_policies(text)
    assert words in str(caught.value)


def test_what_a_trial_may_reach() -> None:
    policies = parse_policies("names=localhost,*.example.org;local=localhost:8080")
    by_name = TrialEgress(policies["names"], None, 1)
    # A name the policy allows that resolves to loopback is refused, as a rebinding would be.
    addresses, why = by_name.check("LOCALHOST.", 80)
    assert addresses == [] and "resolves only to addresses this trial may not" in (why or "")
    assert "port 8080 is not one" in (by_name.check("localhost", 8080)[1] or "")
    outside = by_name.check("example.com", 443)[1] or ""
    assert "is not among the hosts this trial may reach (egress policy names)" in outside
    assert "is not a host name" in (by_name.check("*.example.org", 443)[1] or "")
    assert "is not a host name" in (by_name.check("a\nb", 443)[1] or "")
    # A host:port the operator named is reached as named, loopback included.
    local = TrialEgress(policies["local"], None, 1)
    addresses, why = local.check("localhost", 8080)
    assert why is None and addresses and all(a in ("127.0.0.1", "::1") for a in addresses)
    # A task's own allowed_hosts narrow the policy, never widen it.
    narrowed = TrialEgress(policies["local"], frozenset({"pypi.org"}), 1)
    assert "not among the task's allowed_hosts" in (narrowed.check("localhost", 8080)[1] or "")


@pytest.mark.parametrize("address", ["172.17.0.1", "10.1.2.3", "192.168.0.10", "100.64.1.1"])
def test_a_private_address_is_reached_only_as_the_host_port_the_operator_named(
    address: str,
) -> None:
    """The engine's bridge gateway (172.17.0.1) reaches the host's services on 0.0.0.0; a
    LAN's and a carrier's addresses are the box's neighbours: never reached by a name."""
    policies = parse_policies(f"named={address};exact={address}:3141")
    addresses, why = TrialEgress(policies["named"], None, 1).check(address, 80)
    assert addresses == [] and "the box's own or its network's" in (why or ""), why
    assert f"named as {address}:80 in egress policy named" in (why or "")
    assert TrialEgress(policies["exact"], None, 1).check(address, 3141) == ([address], None)


def test_a_trial_gets_egress_only_when_its_job_and_its_task_both_ask() -> None:
    policies = parse_policies("local=localhost:8080")
    assert trial_egress(policies, OFFLINE, "public", (), 10) is None
    assert trial_egress(policies, "local", None, (), 10) is None
    assert trial_egress(policies, "gone", "public", (), 10) is None
    given = trial_egress(policies, "local", "allowlist: x.org", ("x.org",), 10)
    assert given == TrialEgress(policies["local"], frozenset({"x.org"}), 10)
