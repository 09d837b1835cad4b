"""Size and cost ranges with cel-go's saturating uint64 arithmetic (checker/cost.go
SizeEstimate and CostEstimate), and the node view a cost estimator is given (AstNode).

Stage: shared by celcheck.cost and celcheck.k8scost. Inputs/outputs: values only.
Invariants: bounds are integers in [0, 2**64-1]; sums and products saturate at 2**64-1;
`by_factor` multiplies by a float and rounds up as cel-go does (float64 arithmetic).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from probemarker.sim.crd.schema.cel.celcheck.expr import Expr
from probemarker.sim.crd.schema.cel.celcheck.types import CelType

MAX_U64 = 2**64 - 1
_TWO_TO_64 = math.ldexp(1.0, 64)


def sat_add(x: int, y: int) -> int:
    return MAX_U64 if y > 0 and x > MAX_U64 - y else x + y


def sat_mul(x: int, y: int) -> int:
    return MAX_U64 if y != 0 and x > MAX_U64 // y else x * y


def wrap(x: int) -> int:
    """Go's unchecked uint64 arithmetic (used where cel-go does not guard overflow)."""
    return x & MAX_U64


def by_factor(x: int, factor: float) -> int:
    """multiplyByCostFactor: x * factor rounded up, saturating."""
    xf = float(x)
    if xf > 0 and factor > 0 and xf > MAX_U64 / factor:
        return MAX_U64
    ceil = math.ceil(xf * factor)
    return MAX_U64 if ceil >= _TWO_TO_64 else int(ceil)


@dataclass(frozen=True, slots=True)
class Est:
    """A [lo, hi] range: a size (length of a string, items of a list) or a cost."""

    lo: int
    hi: int

    def add(self, other: Est) -> Est:
        return Est(sat_add(self.lo, other.lo), sat_add(self.hi, other.hi))

    def mul(self, other: Est) -> Est:
        return Est(sat_mul(self.lo, other.lo), sat_mul(self.hi, other.hi))

    def factor(self, factor: float) -> Est:
        return Est(by_factor(self.lo, factor), by_factor(self.hi, factor))

    def union(self, other: Est) -> Est:
        return Est(min(self.lo, other.lo), max(self.hi, other.hi))


ZERO = Est(0, 0)
ONE = Est(1, 1)
UNBOUNDED = Est(0, MAX_U64)


@dataclass(frozen=True, slots=True)
class AstNode:
    """What an estimator sees of a node: its field path from a variable (`self`, `spec`,
    `@items`, `@keys`, `@values`; empty when unknown), its type, the expression (None for
    list items made up by the estimator) and the size computed from the expression itself."""

    path: tuple[str, ...]
    type: CelType
    expr: Expr | None
    computed: Est | None


@dataclass(frozen=True, slots=True)
class CallEstimate:
    cost: Est
    size: Est | None = None
