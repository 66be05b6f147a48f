"""The server's count of open connections (app/serving/connections.py), on its own."""

from __future__ import annotations

from app.serving.connections import Allowance, ConnectionLimits


def test_one_address_is_held_to_its_share_and_every_address_to_the_total() -> None:
    limits = ConnectionLimits(total=5, per_address=2, exempt=lambda address: address == "10.0.0.1")
    assert limits.take("192.0.2.7") == "192.0.2.7"
    assert limits.take("192.0.2.7") == "192.0.2.7"
    assert limits.take("192.0.2.7") is None, "a third from one address"
    # An IPv6 client is its /64, as the call limits count it.
    assert limits.take("2001:db8::1") == "2001:db8::/64"
    assert limits.take("2001:db8::2") == "2001:db8::/64"
    assert limits.take("2001:db8::3") is None
    assert limits.take("10.0.0.1") == "10.0.0.1", "a trusted proxy carries many clients"
    assert limits.take("10.0.0.1") is None, "but every connection counts toward the total"
    assert limits.open == 5
    limits.give_back("192.0.2.7")
    assert limits.take("198.51.100.1") == "198.51.100.1", "a freed connection makes room"
    assert limits.take("192.0.2.7") is None


def test_an_allowance_refills_at_its_rate_and_a_spend_too_big_takes_nothing() -> None:
    allowance = Allowance(per_s=0.0, burst=10)  # no refill: the arithmetic alone
    assert allowance.spend(4) and allowance.spend(6)
    assert not allowance.spend(1)
    refilled = Allowance(per_s=1e9, burst=10)
    assert refilled.spend(10) and refilled.spend(10), "refilled to its burst, never past it"
    assert not refilled.spend(11)
