"""Declarations of the libraries Kubernetes enables for CRD validation rules, on top of the
standard library: k8s.io/apiserver/pkg/cel/library (urls, regex, lists, quantity, ip, cidr,
format) and cel-go's extensions (strings, sets, optional types).

Stage: read by celcheck.env. Input: which libraries a Kubernetes version enables for new
expressions (a `Libraries`). Output: the functions added to an environment, in the order
Kubernetes' base environment registers them (k8s.io/apiserver/pkg/cel/environment/base.go).
The authz libraries are left out: their functions apply only to values a CRD rule never has.
"""

from __future__ import annotations

from dataclasses import dataclass

from probemarker.sim.crd.schema.cel.celcheck import types as t
from probemarker.sim.crd.schema.cel.celcheck.decls import Function, g, m, merge

URL = t.struct("kubernetes.URL")
QUANTITY = t.struct("kubernetes.Quantity")
FORMAT = t.struct("kubernetes.NamedFormat")
IP = t.opaque("net.IP")
CIDR = t.opaque("net.CIDR")
_S, _I, _B, _D = t.STRING, t.INT, t.BOOL, t.DOUBLE
_LIST_S = t.list_of(_S)
_A, _T, _V, _K = t.param("A"), t.param("T"), t.param("V"), t.param("K")
_COMPARABLE = (("int", t.INT), ("uint", t.UINT), ("double", t.DOUBLE), ("bool", t.BOOL),
               ("duration", t.DURATION), ("timestamp", t.TIMESTAMP), ("string", t.STRING),
               ("bytes", t.BYTES))  # fmt: skip
_SUMMABLE = (*_COMPARABLE[:3], _COMPARABLE[4])
FORMAT_NAMES = (
    "dns1123Label", "dns1123Subdomain", "dns1035Label", "qualifiedName", "dns1123LabelPrefix",
    "dns1123SubdomainPrefix", "dns1035LabelPrefix", "labelValue", "uri", "uuid", "byte", "date",
    "datetime",
)  # fmt: skip


@dataclass(frozen=True, slots=True)
class Libraries:
    strings_version: int
    optional_types: bool
    quantity: bool
    sets: bool
    ip_cidr: bool
    format: bool


def _strings(f: dict[str, Function], version: int) -> None:
    merge(f, "charAt", m("string_char_at_int", (_S, _I), _S))
    merge(f, "indexOf", m("string_index_of_string", (_S, _S), _I),
          m("string_index_of_string_int", (_S, _S, _I), _I))  # fmt: skip
    merge(f, "lastIndexOf", m("string_last_index_of_string", (_S, _S), _I),
          m("string_last_index_of_string_int", (_S, _S, _I), _I))  # fmt: skip
    merge(f, "lowerAscii", m("string_lower_ascii", (_S,), _S))
    merge(f, "replace", m("string_replace_string_string", (_S, _S, _S), _S),
          m("string_replace_string_string_int", (_S, _S, _S, _I), _S))  # fmt: skip
    merge(f, "split", m("string_split_string", (_S, _S), _LIST_S),
          m("string_split_string_int", (_S, _S, _I), _LIST_S))  # fmt: skip
    merge(f, "substring", m("string_substring_int", (_S, _I), _S),
          m("string_substring_int_int", (_S, _I, _I), _S))  # fmt: skip
    merge(f, "trim", m("string_trim", (_S,), _S))
    merge(f, "upperAscii", m("string_upper_ascii", (_S,), _S))
    if version >= 1:
        merge(f, "format", m("string_format", (_S, t.list_of(t.DYN)), _S))
        merge(f, "strings.quote", g("strings_quote", (_S,), _S))
    merge(f, "join", m("list_join", (_LIST_S,), _S), m("list_join_string", (_LIST_S, _S), _S))


def _k8s_base(f: dict[str, Function]) -> None:
    merge(f, "url", g("string_to_url", (_S,), URL))
    for fn, stem in (("getScheme", "scheme"), ("getHost", "host"), ("getHostname", "hostname"),
                     ("getPort", "port"), ("getEscapedPath", "escaped_path")):  # fmt: skip
        merge(f, fn, m(f"url_get_{stem}", (URL,), _S))
    merge(f, "getQuery", m("url_get_query", (URL,), t.map_of(_S, _LIST_S)))
    merge(f, "isURL", g("is_url_string", (_S,), _B))
    merge(f, "find", m("string_find_string", (_S, _S), _S))
    merge(f, "findAll", m("string_find_all_string", (_S, _S), _LIST_S),
          m("string_find_all_string_int", (_S, _S, _I), _LIST_S))  # fmt: skip
    merge(
        f, "isSorted", *(m(f"list_{n}_is_sorted_bool", (t.list_of(x),), _B) for n, x in _COMPARABLE)
    )
    merge(f, "sum", *(m(f"list_{n}_sum_{n}", (t.list_of(x),), x) for n, x in _SUMMABLE))
    merge(f, "max", *(m(f"list_{n}_max_{n}", (t.list_of(x),), x) for n, x in _COMPARABLE))
    merge(f, "min", *(m(f"list_{n}_min_{n}", (t.list_of(x),), x) for n, x in _COMPARABLE))
    merge(f, "indexOf", m("list_a_index_of_int", (t.list_of(_A), _A), _I))
    merge(f, "lastIndexOf", m("list_a_last_index_of_int", (t.list_of(_A), _A), _I))


def _optional(f: dict[str, Function]) -> None:
    opt_v = t.optional(_V)
    merge(f, "optional.of", g("optional_of", (_V,), opt_v))
    merge(f, "optional.ofNonZeroValue", g("optional_ofNonZeroValue", (_V,), opt_v))
    merge(f, "optional.none", g("optional_none", (), opt_v))
    merge(f, "value", m("optional_value", (opt_v,), _V))
    merge(f, "hasValue", m("optional_hasValue", (opt_v,), _B))
    merge(f, "or", m("optional_or_optional", (opt_v, opt_v), opt_v))
    merge(f, "orValue", m("optional_orValue_value", (opt_v, _V), _V))
    merge(f, "_[_]", g("optional_list_index_int", (t.optional(t.list_of(_V)), _I), opt_v),
          g("optional_map_index_value", (t.optional(t.map_of(_K, _V)), _K), opt_v))  # fmt: skip


def _quantity(f: dict[str, Function]) -> None:
    q = QUANTITY
    merge(f, "quantity", g("string_to_quantity", (_S,), q))
    merge(f, "isQuantity", g("is_quantity_string", (_S,), _B))
    merge(f, "sign", g("quantity_sign", (q,), _I))
    merge(f, "isGreaterThan", m("quantity_is_greater_than", (q, q), _B))
    merge(f, "isLessThan", m("quantity_is_less_than", (q, q), _B))
    merge(f, "compareTo", m("quantity_compare_to", (q, q), _I))
    merge(f, "asApproximateFloat", m("quantity_get_float", (q,), _D))
    merge(f, "asInteger", m("quantity_get_int", (q,), _I))
    merge(f, "isInteger", m("quantity_is_integer", (q,), _B))
    merge(f, "add", m("quantity_add", (q, q), q), m("quantity_add_int", (q, _I), q))
    merge(f, "sub", m("quantity_sub", (q, q), q), m("quantity_sub_int", (q, _I), q))


def _sets(f: dict[str, Function]) -> None:
    lt = t.list_of(_T)
    for name in ("contains", "equivalent", "intersects"):
        merge(f, f"sets.{name}", g(f"list_sets_{name}_list", (lt, lt), _B))


def _ip_cidr(f: dict[str, Function]) -> None:
    merge(f, "ip", g("string_to_ip", (_S,), IP))
    merge(f, "family", m("ip_family", (IP,), _I))
    merge(f, "ip.isCanonical", g("ip_is_canonical", (_S,), _B))
    for fn, stem in (("isUnspecified", "unspecified"), ("isLoopback", "loopback"),
                     ("isLinkLocalMulticast", "link_local_multicast"),
                     ("isLinkLocalUnicast", "link_local_unicast"),
                     ("isGlobalUnicast", "global_unicast")):  # fmt: skip
        merge(f, fn, m(f"ip_is_{stem}", (IP,), _B))
    merge(f, "isIP", g("is_ip", (_S,), _B))
    merge(f, "string", g("ip_to_string", (IP,), _S))
    merge(f, "cidr", g("string_to_cidr", (_S,), CIDR))
    merge(f, "containsIP", m("cidr_contains_ip_string", (CIDR, _S), _B),
          m("cidr_contains_ip_ip", (CIDR, IP), _B))  # fmt: skip
    merge(f, "containsCIDR", m("cidr_contains_cidr_string", (CIDR, _S), _B),
          m("cidr_contains_cidr", (CIDR, CIDR), _B))  # fmt: skip
    merge(f, "ip", m("cidr_ip", (CIDR,), IP))
    merge(f, "prefixLength", m("cidr_prefix_length", (CIDR,), _I))
    merge(f, "masked", m("cidr_masked", (CIDR,), CIDR))
    merge(f, "isCIDR", g("is_cidr", (_S,), _B))
    merge(f, "string", g("cidr_to_string", (CIDR,), _S))


def _format(f: dict[str, Function]) -> None:
    merge(f, "validate", m("format-validate", (FORMAT, _S), t.optional(_LIST_S)))
    merge(f, "format.named", g("format-named", (_S,), t.optional(FORMAT)))
    for name in FORMAT_NAMES:
        merge(f, f"format.{name}", g(f"format.{name}", (), FORMAT))


def add_libraries(f: dict[str, Function], libs: Libraries) -> None:
    """Add the libraries in the order of Kubernetes' base environment."""
    if libs.strings_version == 0:
        _strings(f, 0)
    _k8s_base(f)
    if libs.optional_types:
        _optional(f)
    if libs.quantity:
        _quantity(f)
    if libs.strings_version > 0:
        _strings(f, libs.strings_version)
    if libs.sets:
        _sets(f)
    if libs.ip_cidr:
        _ip_cidr(f)
    if libs.format:
        _format(f)
