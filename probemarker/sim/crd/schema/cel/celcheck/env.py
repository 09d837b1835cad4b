"""The compile environment of a CRD validation rule, per Kubernetes version.

Stage: built once per (profile, rule node) by celcheck.compile. Inputs: a `Profile` (what a
Kubernetes minor enables for new expressions, and how its cel-go estimates cost) and the
DeclType of the rule's node. Output: an `Env`: identifiers (self, oldSelf, type names),
functions and the struct types of the schema.

Kubernetes 1.28 compiles a new rule with the library set of its compatibility version 1.27 on
cel-go v0.16; 1.32 with that of 1.31 on cel-go v0.22. The differences that matter for CRD rules
are flags of `Profile`.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import cache

from probemarker.sim.crd.schema.cel.celcheck import types as t
from probemarker.sim.crd.schema.cel.celcheck.decls import (
    CROSS_TYPE_COMPARISONS,
    STANDARD_TYPE_IDENTS,
    Function,
    standard_functions,
)
from probemarker.sim.crd.schema.cel.celcheck.decltypes import DeclType, assign_names, struct_types
from probemarker.sim.crd.schema.cel.celcheck.k8slib import Libraries, add_libraries


@dataclass(frozen=True, slots=True)
class Profile:
    """What one Kubernetes minor does when it compiles and costs a new CRD rule."""

    name: str
    libraries: Libraries
    cross_type_numeric_comparisons: bool
    literal_validators: bool  # regex/duration/timestamp literals checked at compile time (1.29+)
    homogeneous_literals_in_checker: bool  # cel-go v0.16 reports mixed literals while checking
    presence_test_cost: int  # has(): 1 on cel-go v0.16, 0 on Kubernetes 1.29+
    comprehension_sizes: bool  # cel-go v0.22 sizes map()/filter() results by their range
    estimator_result_sizes: bool  # cel-go v0.22 keeps result sizes of library functions
    conversion_sizes: bool  # cel-go v0.22 sizes bytes(string)/string(bytes)
    enum_string_sizes: bool  # Kubernetes 1.32 sizes an enum string by its longest value
    keyword_field_names: bool  # self.namespace finds __namespace__ (1.31+)
    optional_old_self: bool  # x-kubernetes-validations[].optionalOldSelf exists (1.29+)


K8S_1_32 = Profile(
    name="1.32",
    libraries=Libraries(
        strings_version=2, optional_types=True, quantity=True, sets=True, ip_cidr=True, format=True
    ),
    cross_type_numeric_comparisons=True,
    literal_validators=True,
    homogeneous_literals_in_checker=False,
    presence_test_cost=0,
    comprehension_sizes=True,
    estimator_result_sizes=True,
    conversion_sizes=True,
    enum_string_sizes=True,
    keyword_field_names=True,
    optional_old_self=True,
)
K8S_1_28 = Profile(
    name="1.28",
    libraries=Libraries(
        strings_version=0,
        optional_types=False,
        quantity=False,
        sets=False,
        ip_cidr=False,
        format=False,
    ),
    cross_type_numeric_comparisons=False,
    literal_validators=False,
    homogeneous_literals_in_checker=True,
    presence_test_cost=1,
    comprehension_sizes=False,
    estimator_result_sizes=False,
    conversion_sizes=False,
    enum_string_sizes=False,
    keyword_field_names=False,
    optional_old_self=False,
)
SELF_TYPE_NAME = "selfType0"  # kube-apiserver names it selfType<nanoseconds> anew per compile
_RESERVED = frozenset(
    {"true", "false", "null", "in", "as", "break", "const", "continue", "else", "for",
     "function", "if", "import", "let", "loop", "package", "namespace", "return", "var",
     "void", "while"}
)  # fmt: skip


@cache
def profile_functions(profile: Profile) -> dict[str, Function]:
    functions = standard_functions()
    add_libraries(functions, profile.libraries)
    return functions


@dataclass(frozen=True, slots=True)
class Env:
    profile: Profile
    idents: dict[str, t.CelType]
    functions: dict[str, Function]
    structs: dict[str, DeclType] = field(default_factory=dict)
    disabled_overloads: frozenset[str] = frozenset()

    def knows_struct(self, struct_name: str) -> bool:
        decl = self.structs.get(struct_name)
        return decl is not None and decl.fields is not None

    def field_type(self, struct_name: str, field_name: str) -> t.CelType | None:
        """The type of a field of a known struct; None if the struct has no such field."""
        fields = self.structs[struct_name].fields or {}
        found = fields.get(field_name)
        if found is None and self.profile.keyword_field_names and field_name in _RESERVED:
            found = fields.get(f"__{field_name}__")
        return found.type.cel_type if found is not None else None


def rule_env(profile: Profile, decl: DeclType, *, optional_old_self: bool) -> Env:
    """The environment of a rule on a node whose declaration is `decl`."""
    named = assign_names(decl, SELF_TYPE_NAME)
    self_type = named.cel_type
    idents = {cel_type.name: t.type_of(cel_type) for cel_type in STANDARD_TYPE_IDENTS}
    if profile.libraries.optional_types:
        idents["optional_type"] = t.type_of(t.optional(t.param("T")))
    idents["self"] = self_type
    idents["oldSelf"] = t.optional(self_type) if optional_old_self else self_type
    disabled = frozenset() if profile.cross_type_numeric_comparisons else _cross_type_comparisons()
    return Env(profile, idents, profile_functions(profile), struct_types(named), disabled)


@cache
def _cross_type_comparisons() -> frozenset[str]:

    return CROSS_TYPE_COMPARISONS
