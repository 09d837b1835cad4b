"""Compile one rule or messageExpression as apiextensions' compileRule does: parse, check,
validate, require the output type, estimate the cost.

Stage: called per x-kubernetes-validations entry by probemarker.sim.crd.validation.celadmit.
Inputs: the expression text, the rule's `Env` and the node's (unnamed) DeclType for the size
estimator. Output: a `Compiled`: `error` holds kube-apiserver's detail text
(`compilation failed: ERROR: <input>:1:6: ...`, `cel expression must evaluate to a bool`,
`messageExpression must evaluate to a string`), else `max_cost` and `uses_old_self`.

Parsing is cached per source text for the life of the process (the trees are immutable).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import lru_cache

import lark

from probemarker.sim.crd.schema.cel import engine
from probemarker.sim.crd.schema.cel.celcheck import types as t
from probemarker.sim.crd.schema.cel.celcheck.checker import check
from probemarker.sim.crd.schema.cel.celcheck.cost import estimate_cost
from probemarker.sim.crd.schema.cel.celcheck.decltypes import DeclType
from probemarker.sim.crd.schema.cel.celcheck.env import Env
from probemarker.sim.crd.schema.cel.celcheck.issues import render_issues
from probemarker.sim.crd.schema.cel.celcheck.k8scost import SETS_ESTIMATORS, KubeEstimator
from probemarker.sim.crd.schema.cel.celcheck.parse import Parsed, parse_tree
from probemarker.sim.crd.schema.cel.celcheck.validators import validate


@dataclass(frozen=True, slots=True)
class Compiled:
    error: str | None = None
    uses_old_self: bool = False
    max_cost: int = 0
    output_type: t.CelType | None = None


_SYNTAX = re.compile(r"ERROR: <input>:(\d+):(\d+): (.*)", re.DOTALL)


@lru_cache(maxsize=4096)
def parse(source: str) -> Parsed | str:
    """The expression tree of `source`, or the rendered syntax error. The position is
    celpy's, and so is the wording after `Syntax error:` (cel-go's parser words it its own way)."""
    try:
        program = engine.compile_cel(source)
    except engine.CelCompileError as exc:
        return _syntax_error(source, exc)
    return parse_tree(source, program.ast)


def _syntax_error(source: str, exc: engine.CelCompileError) -> str:
    """cel-go's layout for a syntax error, with ANTLR's wording for the two usual cases."""
    match = _SYNTAX.fullmatch(str(exc))
    if match is None:
        return str(exc)
    line, column = int(match.group(1)), int(match.group(2))
    lines = source.split("\n")
    offset = min(sum(len(x) + 1 for x in lines[: line - 1]) + column - 1, len(source))
    cause = exc.__cause__.__context__ if exc.__cause__ is not None else None
    message = match.group(3)
    if isinstance(cause, lark.exceptions.UnexpectedCharacters):
        message = f"Syntax error: token recognition error at: '{source[offset : offset + 1]}'"
    elif isinstance(cause, lark.exceptions.UnexpectedToken):
        token = "<EOF>" if cause.token.type == "$END" else str(cause.token)
        message = f"Syntax error: mismatched input '{token}'"
    return render_issues(source, [(offset, message)])


def compile_expression(
    source: str, env: Env, decl: DeclType, *, message_expression: bool = False
) -> Compiled:
    prefix = (
        "messageExpression compilation failed: " if message_expression else "compilation failed: "
    )
    parsed = parse(source)
    if isinstance(parsed, str):
        return Compiled(error=prefix + parsed)
    if parsed.errors:
        return Compiled(error=prefix + render_issues(source, list(parsed.errors)))
    checked = check(parsed.root, env)
    errors = checked.errors or validate(checked, env.profile)
    if errors:
        return Compiled(error=prefix + render_issues(source, errors))
    output = checked.output_type
    if message_expression and output != t.STRING:
        return Compiled(error="messageExpression must evaluate to a string", output_type=output)
    if not message_expression and output != t.BOOL:
        return Compiled(error="cel expression must evaluate to a bool", output_type=output)
    estimators = SETS_ESTIMATORS if env.profile.libraries.sets else None
    cost = estimate_cost(checked, KubeEstimator(decl), env.profile, estimators)
    uses_old_self = "oldSelf" in checked.idents.values()
    return Compiled(uses_old_self=uses_old_self, max_cost=cost.hi, output_type=output)
