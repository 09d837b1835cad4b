"""Shares of a budget that several tenants use at once: who may take the next unit.

Stage: ground floor (pure decisions, no I/O, no clock). Input: how many units of a
budget each tenant holds now (`counts`, tenant -> units; a tenant holding none may be
absent), the budget's size (`total`) and the tenant that asks for one more (`asking`).
Output: the asking tenant's share, and which tenant gives a unit up so that it gets
its share. The daemon's tenants are namespaces; its budgets are the held exec streams
(probe/holds.py), the probe slots (schedule/dispatcher.py) and the idle httpGet
connections (probe/http.py). docs/security.md, "A node shared by many tenants".

The rule (max-min fairness, as the API server's priority and fairness gives each flow
its own queue): a budget is work-conserving (a tenant alone may use all of it), and
when it is full a tenant below its share takes a unit from the tenant holding the
most. A tenant's share is `total // n`, n the tenants holding units and itself: so a
tenant that floods a budget keeps no more than the others leave it, and one that asks
for no more than its share gets it, at once (`yielder`) or at the next unit freed
(`least_served`).

Why the holder with the most: when the budget is full and the asking tenant holds
fewer than `total // n`, the others together hold more than `total * (n-1) / n`, so
the one holding the most holds more than `total // n`: it stays at or above the share
after giving one up, and it is never the asking tenant.
"""

from __future__ import annotations

from collections.abc import Hashable, Iterable, Mapping
from typing import TypeVar

__all__ = ["least_served", "share", "yielder"]

T = TypeVar("T", bound=Hashable)


def share(total: int, counts: Mapping[T, int], asking: T) -> int:
    """The share of `total` of the tenant `asking`: `total // n`, n the tenants holding
    units in `counts` and itself (0 when `total` is smaller than n)."""
    others = sum(1 for tenant, units in counts.items() if units > 0 and tenant != asking)
    return total // (others + 1)


def yielder(total: int, counts: Mapping[T, int], asking: T) -> T | None:
    """When the budget is full (`counts` add up to `total`): the tenant that gives a
    unit up so that `asking` gets one, the tenant holding the most (ties: the greatest
    name, so the choice is the same every time); None when `asking` is at or above its
    share (it waits for a unit of its own to free). Not for a budget with room left:
    then the tenant takes a free unit and nobody yields."""
    if counts.get(asking, 0) >= share(total, counts, asking):
        return None
    most = max(
        ((units, tenant) for tenant, units in counts.items() if tenant != asking and units > 0),
        default=None,
        key=lambda item: (item[0], str(item[1])),
    )
    return None if most is None else most[1]


def least_served(running: Mapping[T, int], waiting: Iterable[T]) -> T | None:
    """Of the tenants with work `waiting` (in the order they are to be served on a
    tie: the caller rotates it), the one with the fewest units `running`; None when
    none waits. A unit freed goes to the tenant using the fewest: no tenant below
    another's count waits behind that other's backlog."""
    best: T | None = None
    fewest = 0
    for tenant in waiting:
        units = running.get(tenant, 0)
        if best is None or units < fewest:
            best, fewest = tenant, units
    return best
