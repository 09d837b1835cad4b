"""cel-go's static cost estimate (checker/cost.go, v0.22; v0.16 where the profile says so).

Stage: after a successful type check. Inputs: the `Checked` tree, an `Estimator` (Kubernetes'
library costs and schema sizes, celcheck.k8scost) and a `Profile`. Output: the [min, max]
cost; kube-apiserver compares the max.

The walk: constants cost 0, identifiers and field selections 1 (a selection on dyn or a list
is free), has() the profile's presence cost, list/map/struct literals 10/30/40 plus their
parts, comprehensions their range, init and result plus (range size) x (condition + step),
calls the function's own cost plus their arguments. Field paths from `self` are tracked so
that the estimator can size what they reach.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Protocol

from probemarker.sim.crd.schema.cel.celcheck import types as t
from probemarker.sim.crd.schema.cel.celcheck.checker import Checked
from probemarker.sim.crd.schema.cel.celcheck.env import Profile
from probemarker.sim.crd.schema.cel.celcheck.estimate import (
    MAX_U64,
    ONE,
    UNBOUNDED,
    ZERO,
    AstNode,
    CallEstimate,
    Est,
    wrap,
)
from probemarker.sim.crd.schema.cel.celcheck.expr import (
    ACCUMULATOR,
    Call,
    Comprehension,
    Expr,
    Ident,
    ListExpr,
    Literal,
    MapExpr,
    Select,
    StructExpr,
)

STRING_TRAVERSAL = 0.1
REGEX_LENGTH = 0.25
_COMPARISONS = frozenset(
    f"{op}_{kind}"
    for op in ("less", "greater", "less_equals", "greater_equals")
    for kind in ("string", "bytes")
) | {"equals", "not_equals"}


class Estimator(Protocol):
    def estimate_size(self, node: AstNode) -> Est | None: ...

    def estimate_call(
        self, function: str, overload: str, target: AstNode | None, args: list[AstNode]
    ) -> CallEstimate | None: ...


OverloadEstimator = Callable[[Estimator, AstNode | None, list[AstNode]], CallEstimate | None]


def _literal_size(e: Expr) -> Est | None:
    if isinstance(e, Literal):
        if isinstance(e.value, str):
            return Est(len(e.value), len(e.value))
        if isinstance(e.value, bytes):
            return Est(len(e.value), len(e.value))
        return ONE if e.type.kind is not t.Kind.ERROR else None
    if isinstance(e, ListExpr):
        return Est(len(e.elements), len(e.elements))
    if isinstance(e, MapExpr):
        return Est(len(e.entries), len(e.entries))
    return None


class Coster:
    def __init__(
        self,
        checked: Checked,
        estimator: Estimator,
        profile: Profile,
        overload_estimators: dict[str, OverloadEstimator] | None = None,
    ) -> None:
        self.checked = checked
        self.estimator = estimator
        self.profile = profile
        self.overload_estimators = overload_estimators or {}
        self.paths: dict[int, tuple[str, ...]] = {}
        self.iter_ranges: dict[str, list[Expr]] = {}
        self.computed: dict[int, Est] = {}
        self.presence = Est(profile.presence_test_cost, profile.presence_test_cost)

    def node(self, e: Expr) -> AstNode:
        path = self.paths.get(e.id, ())
        if path and path[0] == ACCUMULATOR:
            path = ()
        cel_type = self.checked.types.get(e.id, t.DYN)
        computed = self.computed.get(e.id) or _literal_size(e)
        return AstNode(path, cel_type, e, computed)

    def size(self, node: AstNode) -> Est:
        """cel-go's sizeEstimate: computed, else estimated, else 1 for scalars, else unbounded."""
        if node.computed is not None:
            return node.computed
        estimated = self.estimator.estimate_size(node)
        if estimated is not None:
            return estimated
        return ONE if node.type.kind in t.SCALARS else UNBOUNDED

    def cost(self, e: Expr) -> Est:
        e = self.checked.rewrites.get(e.id, e)
        if isinstance(e, Literal):
            return ZERO
        if isinstance(e, Ident):
            return self.cost_ident(e)
        if isinstance(e, Select):
            return self.cost_select(e)
        if isinstance(e, Call):
            return self.cost_call(e)
        if isinstance(e, ListExpr):
            return self.sum_of(e.elements, 10)
        if isinstance(e, MapExpr):
            return self.sum_of(tuple(x for entry in e.entries for x in entry), 30)
        if isinstance(e, StructExpr):
            return self.sum_of(tuple(v for _, v in e.fields), 40)
        if isinstance(e, Comprehension):
            return self.cost_comprehension(e)
        return ZERO

    def sum_of(self, parts: tuple[Expr, ...], base: int) -> Est:
        total = ZERO
        for part in parts:
            total = total.add(self.cost(part))
        return total.add(Est(base, base))

    def cost_ident(self, e: Ident) -> Est:
        stack = self.iter_ranges.get(e.name)
        if stack:
            iter_range = stack[-1]
            kind = self.checked.types.get(iter_range.id, t.DYN).kind
            base = self.paths.get(iter_range.id, ())
            if kind is t.Kind.LIST:
                self.paths[e.id] = (*base, "@items")
            elif kind is t.Kind.MAP:
                self.paths[e.id] = (*base, "@keys")
        else:
            self.paths[e.id] = (e.name,)
        return ONE

    def cost_select(self, e: Select) -> Est:
        if e.test_only:
            return self.presence.add(self.cost(e.operand))
        total = self.cost(e.operand)
        operand_kind = self.checked.types.get(e.operand.id, t.DYN).kind
        if operand_kind in (t.Kind.MAP, t.Kind.STRUCT, t.Kind.TYPE_PARAM):
            total = total.add(ONE)
        self.paths[e.id] = (*self.paths.get(e.operand.id, ()), e.field)
        return total

    def cost_call(self, e: Call) -> Est:
        arg_costs = [self.cost(a) for a in e.args]
        arg_nodes = [self.node(a) for a in e.args]
        overloads = self.checked.overloads.get(e.id, ())
        if not overloads:
            return ZERO
        total, target = ZERO, None
        if e.target is not None:
            total = self.cost(e.target)
            target = self.node(e.target)
        fn_cost, result = Est(MAX_U64, 0), None
        for overload in overloads:
            call = self.function_cost(e.function, overload, target, arg_nodes, arg_costs)
            fn_cost = fn_cost.union(call.cost)
            if call.size is not None:
                result = call.size if result is None else result.union(call.size)
            if overload in ("index_list", "index_map") and e.args:
                step = "@items" if overload == "index_list" else "@values"
                self.paths[e.id] = (*self.paths.get(e.args[0].id, ()), step)
        if result is not None:
            self.computed[e.id] = result
        return total.add(fn_cost)

    def cost_comprehension(self, e: Comprehension) -> Est:
        total = self.cost(e.iter_range).add(self.cost(e.accu_init))
        self.iter_ranges.setdefault(e.iter_var, []).append(e.iter_range)
        loop = self.cost(e.loop_condition)
        step = self.cost(e.loop_step)
        self.iter_ranges[e.iter_var].pop()
        total = total.add(self.cost(e.result))
        count = self.size(self.node(e.iter_range))
        if self.profile.comprehension_sizes:
            self.computed[e.id] = count
        return total.add(count.mul(step.add(loop)))

    def function_cost(
        self,
        function: str,
        overload: str,
        target: AstNode | None,
        args: list[AstNode],
        arg_costs: list[Est],
    ) -> CallEstimate:
        arg_sum = ZERO
        for item in arg_costs:
            arg_sum = arg_sum.add(item)
        special = self.overload_estimators.get(overload)
        if special is not None:
            found = special(self.estimator, target, args)
            if found is not None:
                return CallEstimate(found.cost.add(arg_sum), found.size)
        found = self.estimator.estimate_call(function, overload, target, args)
        if found is not None:
            keep = found.size if self.profile.estimator_result_sizes else None
            return CallEstimate(found.cost.add(arg_sum), keep)
        if overload in ("logical_or", "logical_and"):
            left, right = arg_costs
            return CallEstimate(Est(left.lo, left.add(right).hi))
        if overload == "conditional":
            size = self.size(args[1]).union(self.size(args[2]))
            return CallEstimate(arg_costs[0].add(arg_costs[1].union(arg_costs[2])), size)
        linear = self.linear_cost(overload, target, args)
        if linear is not None:
            return CallEstimate(linear.cost.add(arg_sum), linear.size)
        return CallEstimate(ONE.add(arg_sum))

    def linear_cost(
        self, overload: str, target: AstNode | None, args: list[AstNode]
    ) -> CallEstimate | None:
        """The costs cel-go computes itself for functions linear in their sizes (argument
        costs not included); None for the O(1) rest."""
        new_sizes = self.profile.conversion_sizes
        if overload == "string_format" and target is not None:
            return CallEstimate(self.size(target).factor(STRING_TRAVERSAL))
        if overload in ("string_to_bytes", "bytes_to_string", "strings_quote") and len(args) == 1:
            size = self.size(args[0])
            cost = size.factor(STRING_TRAVERSAL)
            if not new_sizes:
                return CallEstimate(cost)
            if overload == "string_to_bytes":
                return CallEstimate(cost, Est(size.lo, wrap(size.hi * 4)))
            if overload == "bytes_to_string":
                return CallEstimate(cost, Est(size.lo // 4, size.hi))
            return CallEstimate(cost, Est(wrap(size.lo + 2), wrap(size.hi * 2 + 2)))
        if overload in ("starts_with_string", "ends_with_string") and len(args) == 1:
            return CallEstimate(self.size(args[0]).factor(STRING_TRAVERSAL))
        if overload == "in_list" and len(args) == 2:
            return CallEstimate(self.size(args[1]).factor(1))
        if overload == "matches_string" and target is not None and len(args) == 1:
            text = self.size(target).add(ONE).factor(STRING_TRAVERSAL)
            return CallEstimate(text.mul(self.size(args[0]).factor(REGEX_LENGTH)))
        if overload == "contains_string" and target is not None and len(args) == 1:
            text = self.size(target).factor(STRING_TRAVERSAL)
            return CallEstimate(text.mul(self.size(args[0]).factor(STRING_TRAVERSAL)))
        if overload in ("add_string", "add_bytes", "add_list") and len(args) == 2:
            size = self.size(args[0]).add(self.size(args[1]))
            if overload == "add_list":
                return CallEstimate(ONE, size)
            return CallEstimate(size.factor(STRING_TRAVERSAL), size)
        if overload in _COMPARISONS:
            smallest = min(self.size(args[0]).hi, self.size(args[1]).hi)
            return CallEstimate(Est(1 if smallest > 0 else 0, smallest).factor(STRING_TRAVERSAL))
        return None


def estimate_cost(
    checked: Checked,
    estimator: Estimator,
    profile: Profile,
    overload_estimators: dict[str, OverloadEstimator] | None = None,
) -> Est:
    """The cost range of a checked expression."""
    return Coster(checked, estimator, profile, overload_estimators).cost(checked.root)
