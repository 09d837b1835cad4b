"""A CEL type checker and cost estimator for CRD validation rules, as kube-apiserver has them
(cel-go's checker and checker/cost.go, Kubernetes' CEL libraries, declarations and sizes).

Pipeline, one module per stage: `parse` (celpy's lark tree -> cel-go's expression tree, with
`macros` and `literals`), `decltypes` (schema node -> CEL declaration with size bounds), `env`
(identifiers and functions per Kubernetes version), `checker` (types and overloads, cel-go's
error texts), `validators` (literal checks after type checking), `cost` + `k8scost` (the static
cost estimate), `compile` (all of it for one expression), `issues` (cel-go's error rendering).
The CRD-level budget checks built on it are in probemarker.sim.crd.validation.celadmit.
"""

from probemarker.sim.crd.schema.cel.celcheck.compile import Compiled, compile_expression
from probemarker.sim.crd.schema.cel.celcheck.decltypes import DeclType, schema_decl_type
from probemarker.sim.crd.schema.cel.celcheck.env import K8S_1_28, K8S_1_32, Env, Profile, rule_env

__all__ = [
    "K8S_1_28",
    "K8S_1_32",
    "Compiled",
    "DeclType",
    "Env",
    "Profile",
    "compile_expression",
    "rule_env",
    "schema_decl_type",
]
