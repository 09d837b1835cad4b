"""Kubernetes' part of the cost estimate: the schema size estimator of apiextensions
(schema/cel/compilation.go sizeEstimator), the library costs of k8s.io/apiserver/pkg/cel/library
(cost.go EstimateCallCost) and cel-go's sets extension costs.

Stage: plugged into celcheck.cost. Input: the (unnamed) DeclType of the rule's node.
Outputs: size estimates of field paths and call estimates of library functions.

Quirks kept on purpose, because they decide accept/refuse exactly as on a real server: a path
is walked from the rule's node whatever variable it starts with (so `int` in
`type(self) == int` has the size of `self`); map keys are `string` declarations with no
maximum length (size 0); the target of a global call is treated as present (`cidr(s)` costs the
traversal of `s`); `_==_` on URLs compares the computed size of the right side twice.
"""

from __future__ import annotations

import math

from probemarker.sim.crd.schema.cel.celcheck import types as t
from probemarker.sim.crd.schema.cel.celcheck.cost import (
    REGEX_LENGTH,
    STRING_TRAVERSAL,
    Estimator,
    OverloadEstimator,
)
from probemarker.sim.crd.schema.cel.celcheck.decltypes import DeclType
from probemarker.sim.crd.schema.cel.celcheck.estimate import (
    MAX_U64,
    ONE,
    UNBOUNDED,
    ZERO,
    AstNode,
    CallEstimate,
    Est,
)
from probemarker.sim.crd.schema.cel.celcheck.expr import Literal
from probemarker.sim.crd.schema.cel.celcheck.k8slib import CIDR, FORMAT, IP, QUANTITY, URL

_NOMINAL = frozenset(
    {"masked", "prefixLength", "family", "isUnspecified", "isLoopback", "isLinkLocalMulticast",
     "isLinkLocalUnicast", "isGlobalUnicast", "format.named", "sign", "asInteger", "isInteger",
     "asApproximateFloat", "isGreaterThan", "isLessThan", "compareTo", "add", "sub",
     "getScheme", "getHostname", "getHost", "getPort", "getEscapedPath", "getQuery"}
)  # fmt: skip
_ARG_TRAVERSAL = frozenset({"cidr", "isIP", "isCIDR", "quantity", "isQuantity"})
_TARGET_TRAVERSAL = frozenset({"lowerAscii", "upperAscii", "substring", "trim"})
_LIST_SCANS = frozenset({"isSorted", "sum", "max", "min", "indexOf", "lastIndexOf"})
_MAX_NAME_FORMAT_REGEX = 128
_IP_BYTES = Est(4, 16)


class KubeEstimator:
    """library.CostEstimator with apiextensions' sizeEstimator over `root`."""

    def __init__(self, root: DeclType) -> None:
        self.root = root

    def estimate_size(self, node: AstNode) -> Est | None:
        if not node.path:
            return None
        current = self.root
        for name in node.path[1:]:
            nxt: DeclType | None
            if name in ("@items", "@values"):
                nxt = current.elem
            elif name == "@keys":
                nxt = current.key
            else:
                found = current.fields.get(name) if current.fields is not None else None
                nxt = found.type if found is not None else None
            if nxt is None:
                return None
            current = nxt
        return Est(0, current.max_elements)

    def size(self, node: AstNode) -> Est:
        """The library's sizeEstimate: computed, else estimated, else unbounded."""
        if node.computed is not None:
            return node.computed
        estimated = self.estimate_size(node)
        return estimated if estimated is not None else UNBOUNDED

    def estimate_call(
        self, function: str, overload: str, target: AstNode | None, args: list[AstNode]
    ) -> CallEstimate | None:
        if function in _NOMINAL:
            return CallEstimate(ONE)
        if function in _LIST_SCANS:
            return self._list_scan(target) if target is not None else None
        if function in ("url", "jsonpatch.escapeKey") and len(args) == 1:
            size = self.size(args[0])
            return CallEstimate(size.factor(STRING_TRAVERSAL), size)
        if function in _TARGET_TRAVERSAL and target is not None:
            size = self.size(target)
            return CallEstimate(size.factor(STRING_TRAVERSAL), size)
        if function == "replace" and target is not None and len(args) >= 2:
            return self._replace(target, args)
        if function == "split" and target is not None:
            return self._split(target, args)
        if function == "join" and target is not None:
            return self._join(target, args)
        if function in ("find", "findAll") and target is not None and args:
            size = self.size(target)
            text = size.add(ONE).factor(STRING_TRAVERSAL)
            regex = self.size(args[0]).factor(REGEX_LENGTH)
            return CallEstimate(text.mul(regex), Est(0, size.hi))
        return self._network_and_more(function, overload, target, args)

    def _network_and_more(
        self, function: str, overload: str, target: AstNode | None, args: list[AstNode]
    ) -> CallEstimate | None:
        if function in _ARG_TRAVERSAL and args:
            return CallEstimate(self.size(args[0]).factor(STRING_TRAVERSAL))
        if function == "ip":
            if args:
                return CallEstimate(self.size(args[0]).factor(STRING_TRAVERSAL))
            return CallEstimate(ONE)
        if function == "ip.isCanonical" and args:
            return CallEstimate(self.size(args[0]).factor(2 * STRING_TRAVERSAL))
        if function in ("containsIP", "containsCIDR") and args:
            cost = _IP_BYTES.add(_IP_BYTES).factor(STRING_TRAVERSAL)
            if function == "containsCIDR":
                cost = cost.add(_IP_BYTES.factor(STRING_TRAVERSAL)).add(ONE)
            if overload in ("cidr_contains_ip_string", "cidr_contains_cidr_string"):
                cost = cost.add(self.size(args[0]).factor(STRING_TRAVERSAL))
            return CallEstimate(cost)
        if function == "validate" and args:
            traversal = self.size(args[0]).factor(STRING_TRAVERSAL)
            return CallEstimate(traversal.factor(_MAX_NAME_FORMAT_REGEX * REGEX_LENGTH))
        if function == "_==_" and len(args) == 2:
            return self._equality(args[0], args[1])
        return None

    def _list_element(self, target: AstNode) -> AstNode | None:
        if not target.type.params:
            return None
        path = (*target.path, "@items") if target.path else ()
        return AstNode(path, target.type.params[0], None, None)

    def _list_scan(self, target: AstNode) -> CallEstimate:
        element = self._list_element(target)
        if element is None:
            return CallEstimate(self.size(target).factor(STRING_TRAVERSAL))
        per_item = ONE
        if element.type.kind in (t.Kind.STRING, t.Kind.BYTES):
            per_item = per_item.add(self.size(element).factor(STRING_TRAVERSAL))
        return CallEstimate(self.size(target).mul(per_item))

    def _replace(self, target: AstNode, args: list[AstNode]) -> CallEstimate:
        size = self.size(target)
        old, new = self.size(args[0]), self.size(args[1])
        if old.lo == 0:
            count_hi = size.hi + 1 if size.hi < MAX_U64 else size.hi
            kept_hi = size.hi
        elif new.hi <= old.lo:
            count_hi, kept_hi = 0, size.hi
        else:
            count_hi, kept_hi = _ceil_div(size.hi, old.lo), 0
        if old.hi == 0:
            count_lo = size.lo + 1 if size.lo < MAX_U64 else size.lo
            kept_lo = size.lo
        elif old.hi <= new.lo:
            count_lo, kept_lo = 0, size.lo
        else:
            count_lo, kept_lo = _ceil_div(size.lo, old.hi), 0
        result = Est(count_lo, count_hi).mul(new).add(Est(kept_lo, kept_hi))
        return CallEstimate(size.factor(2 * STRING_TRAVERSAL), result)

    def _split(self, target: AstNode, args: list[AstNode]) -> CallEstimate:
        size = self.size(target)
        most = size.hi
        if len(args) > 1 and isinstance(args[1].expr, Literal):
            value = args[1].expr.value
            if isinstance(value, int) and not isinstance(value, bool):
                most = value & MAX_U64
        return CallEstimate(size.factor(2 * STRING_TRAVERSAL), Est(0, most))

    def _join(self, target: AstNode, args: list[AstNode]) -> CallEstimate:
        items = self.size(target)
        element = self._list_element(target)
        size = items.mul(self.size(element)) if element is not None else ZERO
        if args:
            separators = Est(max(items.lo - 1, 0), max(items.hi - 1, 0))
            size = size.add(self.size(args[0]).mul(separators))
        return CallEstimate(size.factor(STRING_TRAVERSAL), size)

    def _equality(self, lhs: AstNode, rhs: AstNode) -> CallEstimate | None:
        if lhs.type.name != rhs.type.name:
            return None
        kind, name = lhs.type.kind, lhs.type.name
        if kind is t.Kind.OPAQUE and name in (IP.name, CIDR.name):
            return CallEstimate(ONE)
        if kind is t.Kind.STRUCT and name == QUANTITY.name:
            return CallEstimate(ONE)
        if kind is t.Kind.STRUCT and name == FORMAT.name:
            return CallEstimate(Est(1, 64).factor(STRING_TRAVERSAL))
        if kind is t.Kind.STRUCT and name == URL.name:
            size = rhs.computed if rhs.computed is not None else ONE
            return CallEstimate(Est(1, size.hi).factor(STRING_TRAVERSAL))
        return None


def _ceil_div(x: int, y: int) -> int:
    """uint64(math.Ceil(float64(x) / float64(y))) as Go computes it (float64)."""
    value = math.ceil(float(x) / float(y))
    return MAX_U64 if value >= 2.0**64 else int(value)


def _sets_cost(factor: float) -> OverloadEstimator:
    def estimate(
        estimator: Estimator, target: AstNode | None, args: list[AstNode]
    ) -> CallEstimate | None:
        del target
        if len(args) != 2:
            return None
        sizes = [_plain_size(estimator, a) for a in args]
        return CallEstimate(sizes[0].mul(sizes[1]).factor(factor).add(ONE))

    return estimate


def _plain_size(estimator: Estimator, node: AstNode) -> Est:
    if node.computed is not None:
        return node.computed
    found = estimator.estimate_size(node)
    return found if found is not None else UNBOUNDED


SETS_ESTIMATORS: dict[str, OverloadEstimator] = {
    "list_sets_contains_list": _sets_cost(1),
    "list_sets_intersects_list": _sets_cost(1),
    "list_sets_equivalent_list": _sets_cost(2),
}
