"""The one definition of what a valid PodProbeMarker is.

Stage: api (pure). Everything the three enforcers share lives here: the Python
validator (`validation.py`), the CRD generator (`crd.py`, whose OpenAPI schema and
CEL rules the API server enforces) and, through the validator, the daemon.
Regular expressions are written in the common subset of Python `re` and RE2 (the
dialect of CEL's `matches()` and of OpenAPI `pattern` in the API server), so both
sides read the same text. Lengths follow k8s.io/apimachinery/pkg/util/validation.
"""

from __future__ import annotations

from typing import Final

GROUP: Final = "probemarker.io"
VERSION: Final = "v1alpha1"
API_VERSION: Final = f"{GROUP}/{VERSION}"
KIND: Final = "PodProbeMarker"
PLURAL: Final = "podprobemarkers"
SINGULAR: Final = "podprobemarker"
SHORT_NAME: Final = "ppm"
# The `reportingController` of the daemon's events (events.k8s.io/v1).
REPORTING_CONTROLLER: Final = f"{GROUP}/daemon"

# Kruise's resource: same spec, accepted by the validator and (opt-in) by the daemon.
KRUISE_GROUP: Final = "apps.kruise.io"
KRUISE_API_VERSION: Final = f"{KRUISE_GROUP}/v1alpha1"
ACCEPTED_API_VERSIONS: Final = (API_VERSION, KRUISE_API_VERSION)

STATES: Final = ("Succeeded", "Failed")
# The probe kinds, each named here once (core/v1 Probe's field names): api/model.py's
# actions carry them as `kind`, api/parse.py reads them, daemon/assembly.py registers
# their handlers.
EXEC: Final = "exec"
HTTP_GET: Final = "httpGet"
TCP_SOCKET: Final = "tcpSocket"
GRPC: Final = "grpc"
HANDLERS: Final = (EXEC, HTTP_GET, TCP_SOCKET, GRPC)
SCHEMES: Final = ("HTTP", "HTTPS")
SELECTOR_OPERATORS: Final = ("In", "NotIn", "Exists", "DoesNotExist")

# The kubelet's defaults (k8s.io/kubernetes/pkg/apis/core/v1/defaults.go SetDefaults_Probe).
TIMING_DEFAULTS: Final = {
    "initialDelaySeconds": 0,
    "timeoutSeconds": 1,
    "periodSeconds": 10,
    "successThreshold": 1,
    "failureThreshold": 3,
}
# An explicit value below the minimum is an error, never a request for the default.
TIMING_MINIMUMS: Final = {
    "initialDelaySeconds": 0,
    "timeoutSeconds": 1,
    "periodSeconds": 1,
    "successThreshold": 1,
    "failureThreshold": 1,
    # Part of core/v1 Probe, accepted so Kruise manifests apply unchanged; it has no
    # meaning here (nothing is restarted on failure) and is ignored.
    "terminationGracePeriodSeconds": 1,
}
INT32_MAX: Final = 2**31 - 1
HTTP_PATH_DEFAULT: Final = "/"
HTTP_SCHEME_DEFAULT: Final = "HTTP"

# Condition types owned by Kubernetes, the kubelet or Kruise: never ours to write.
RESERVED_CONDITION_TYPES: Final = (
    "PodScheduled",
    "Initialized",
    "Ready",
    "ContainersReady",
    "PodReadyToStartContainers",
    "DisruptionTarget",
    "PodResizePending",
    "PodResizeInProgress",
    "KruisePodReady",
    "InPlaceUpdateReady",
)

# Bounds. The API server needs them to bound the cost of CEL rules; they are generous
# for real markers. Annotations: Kubernetes caps a pod's annotations at 256 KiB in
# total (keys + values, bytes). One policy writes at most
# MAX_POLICY_ENTRIES * (MAX_QUALIFIED_NAME_LENGTH + MAX_ANNOTATION_VALUE_BYTES) bytes,
# which stays below that cap, so a valid marker can never push a pod over it alone.
MAX_PROBES: Final = 32
MAX_POLICIES: Final = 2
MAX_POLICY_ENTRIES: Final = 32
MAX_ANNOTATION_VALUE_BYTES: Final = 4096
TOTAL_ANNOTATION_BYTES: Final = 256 * 1024
MAX_PROBE_NAME_LENGTH: Final = 63
MAX_COMMAND_ARGS: Final = 64
MAX_COMMAND_ARG_LENGTH: Final = 4096
MAX_HTTP_PATH_LENGTH: Final = 2048
MAX_HTTP_HEADERS: Final = 16
MAX_HTTP_HEADER_NAME_LENGTH: Final = 256
MAX_HTTP_HEADER_VALUE_LENGTH: Final = 4096
MAX_GRPC_SERVICE_LENGTH: Final = 253
MAX_SELECTOR_EXPRESSIONS: Final = 32
MAX_SELECTOR_VALUES: Final = 64
MAX_DNS1123_LABEL_LENGTH: Final = 63
MAX_DNS1123_SUBDOMAIN_LENGTH: Final = 253
MAX_QUALIFIED_NAME_PREFIX_LENGTH: Final = 253
MAX_QUALIFIED_NAME_NAME_LENGTH: Final = 63
MAX_QUALIFIED_NAME_LENGTH: Final = (
    MAX_QUALIFIED_NAME_PREFIX_LENGTH + 1 + MAX_QUALIFIED_NAME_NAME_LENGTH
)
MAX_LABEL_VALUE_LENGTH: Final = 63
MAX_PORT_NAME_LENGTH: Final = 15

# --- patterns (anchored; each is valid RE2 and Python re) ---------------------------
_DNS1123_LABEL = "[a-z0-9]([-a-z0-9]*[a-z0-9])?"
_DNS1123_SUBDOMAIN = f"{_DNS1123_LABEL}(\\.{_DNS1123_LABEL})*"
# Annotation key prefixes are checked after lower-casing in Kubernetes
# (ValidateAnnotations), which is the same as allowing upper case here.
_DNS1123_SUBDOMAIN_ANY_CASE = (
    "[A-Za-z0-9]([-A-Za-z0-9]*[A-Za-z0-9])?(\\.[A-Za-z0-9]([-A-Za-z0-9]*[A-Za-z0-9])?)*"
)
# The name part of a qualified name, length bound (63) built in.
_QUALIFIED_NAME_NAME = "[A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?"

DNS1123_LABEL_RE: Final = f"^{_DNS1123_LABEL}$"
DNS1123_SUBDOMAIN_RE: Final = f"^{_DNS1123_SUBDOMAIN}$"
# Prefix length (<= 253) is a separate check: QUALIFIED_NAME_PREFIX_LENGTH_RE.
QUALIFIED_NAME_RE: Final = f"^({_DNS1123_SUBDOMAIN}/)?{_QUALIFIED_NAME_NAME}$"
ANNOTATION_KEY_RE: Final = f"^({_DNS1123_SUBDOMAIN_ANY_CASE}/)?{_QUALIFIED_NAME_NAME}$"
QUALIFIED_NAME_PREFIX_LENGTH_RE: Final = "^[^/]{1,253}/"
LABEL_VALUE_RE: Final = f"^({_QUALIFIED_NAME_NAME})?$"
# `{{.Result}}` in a markerPolicy value (api/template.py): the one Go template action
# accepted, with Go's template spaces inside the braces.
RESULT_ACTION_RE: Final = "\\{\\{[ \\t\\r\\n]*\\.Result[ \\t\\r\\n]*\\}\\}"
# A markerPolicy label value: a label value in which `{{.Result}}` may stand for any
# character. Every unit (an alphanumeric, '-', '_', '.', or the action) counts as one
# character, so `{0,61}` bounds the value at 63 with a one-character result; the
# rendered value is checked again on every write (write/room.py, write/desired.py).
_LABEL_UNIT_END = f"([A-Za-z0-9]|{RESULT_ACTION_RE})"
LABEL_TEMPLATE_RE: Final = (
    f"^({_LABEL_UNIT_END}(([-A-Za-z0-9_.]|{RESULT_ACTION_RE}){{0,61}}{_LABEL_UNIT_END})?)?$"
)
# A markerPolicy annotation value: any text in which every `{{` begins `{{.Result}}`.
# No look-ahead (RE2 has none): a character that is not '{', a '{' followed by one
# that is not, the action, and one '{' at the very end.
ANNOTATION_TEMPLATE_RE: Final = f"^([^{{]|\\{{[^{{]|{RESULT_ACTION_RE})*\\{{?$"
# A written template's length: the action's spaces are not bounded by the patterns.
MAX_LABEL_TEMPLATE_LENGTH: Final = 1024
# IANA_SVC_NAME (RFC 6335): lower-case alphanumerics and '-', at most 15 characters
# (MAX_PORT_NAME_LENGTH, checked apart), at least one letter, no leading, trailing or
# doubled '-'. One pattern, so the CRD can say it in OpenAPI (`pattern`) instead of CEL:
# segments of alphanumerics joined by single '-'; the segments before the first letter
# are all digits.
PORT_NAME_RE: Final = "^([0-9]+-)*[0-9]*[a-z][a-z0-9]*(-[a-z0-9]+)*$"
# An HTTP header field name is an RFC 7230 token.
HTTP_HEADER_NAME_RE: Final = "^[-!#$%&'*+.^_`|~0-9A-Za-z]+$"
# An HTTP header field value (RFC 9110 field-value): no control characters but HTAB.
# A CR or LF would let a marker add headers of its own (header injection); Go's
# net/http and aiohttp refuse to send such a value, so the API refuses to store it.
HTTP_HEADER_VALUE_RE: Final = "^[^\\x00-\\x08\\x0a-\\x1f\\x7f]*$"
# An absolute path: starts with '/', no whitespace or control characters.
# Explicit ranges, not \\s: Python's \\s is Unicode-aware, RE2's is ASCII only.
HTTP_PATH_RE: Final = "^/[^\\x00-\\x20\\x7f]*$"
# Probe names end up in events, logs and the ownership annotation: no '#' (it joins
# marker and probe in identities), no control characters, no leading/trailing space.
PROBE_NAME_RE: Final = "^[^#\\x00-\\x20\\x7f]([^#\\x00-\\x1f\\x7f]*[^#\\x00-\\x20\\x7f])?$"
# Key prefixes Kubernetes reserves for itself. The daemon's admission policy (docs/security.md)
# refuses writes of them, so a marker that asks for one could never take effect.
# Subdomains (app.kubernetes.io/, controller.kubernetes.io/) stay allowed.
RESERVED_KEY_PREFIXES: Final = ("kubernetes.io", "k8s.io")
RESERVED_KEY_PREFIX_RE: Final = "(?i)^(kubernetes\\.io|k8s\\.io)/"
# probemarker's own prefix: the daemon keeps its ownership record in
# probemarker.io/owned, and a policy key there could overwrite or forge it. As with
# kubernetes.io/, only the exact prefix is reserved: x.probemarker.io/ stays allowed.
OWN_KEY_PREFIX: Final = GROUP
OWN_KEY_PREFIX_RE: Final = "(?i)^" + OWN_KEY_PREFIX.replace(".", "\\.") + "/"

# --- messages shared by the validator and the CRD's CEL rules ---------------------
MSG_SELECTOR_EMPTY: Final = (
    "must select pods: set matchLabels or matchExpressions (an empty selector would match "
    "every pod in the namespace)"
)
MSG_SELECTOR_IMMUTABLE: Final = (
    "is immutable: delete and re-create the PodProbeMarker to select other pods"
)
MSG_ONE_HANDLER: Final = "must set exactly one of exec, httpGet, tcpSocket, grpc"
MSG_HOST: Final = "host is not allowed: probes reach only the pod's own IP; remove the field"
MSG_PROBE_NAMES_UNIQUE: Final = "probe names must be unique within the marker"
MSG_CONDITION_TYPES_UNIQUE: Final = "podConditionType must be unique within the marker"
MSG_POLICY_STATES_UNIQUE: Final = "each state may have at most one markerPolicy entry"
MSG_POLICY_EMPTY: Final = "must set labels or annotations (or both)"
MSG_POLICY_OR_CONDITION: Final = (
    "must set markerPolicy or podConditionType (or both), or the probe has no effect"
)
MSG_RESERVED_CONDITION: Final = (
    "is owned by Kubernetes, the kubelet or Kruise; choose your own type, e.g. example.com/Idle"
)
# Condition types share the label keys' reserved prefixes: Kubernetes owns every
# condition type under kubernetes.io/ and k8s.io/ (as it owns such keys), and the
# daemon's admission policy refuses to write them.
MSG_RESERVED_CONDITION_PREFIX: Final = (
    "must not use the prefixes kubernetes.io/ or k8s.io/, which Kubernetes reserves "
    "(probemarker may not write them); choose your own type, e.g. example.com/Idle "
    "(subdomains such as app.kubernetes.io/ are allowed)"
)
MSG_PROBE_NAME: Final = "must not contain '#' or control characters, nor start or end with a space"
MSG_RESERVED_KEY_PREFIX: Final = (
    "keys must not use the prefixes kubernetes.io/ or k8s.io/, which Kubernetes reserves "
    "(probemarker may not write them); use your own, e.g. example.com/idle "
    "(subdomains such as app.kubernetes.io/ are allowed)"
)
MSG_OWN_KEY_PREFIX: Final = (
    f"keys must not use the prefix {OWN_KEY_PREFIX}/, which probemarker keeps for its own "
    f"records ({OWN_KEY_PREFIX}/owned); use your own, e.g. example.com/idle (subdomains "
    f"such as x.{OWN_KEY_PREFIX}/ are allowed)"
)
# A policy label its own selector reads: writing it deselects the pod, deselecting
# removes it, the pod is selected again (issue 15: set and removed every period).
MSG_SELECTOR_LABEL_WRITTEN: Final = (
    "which spec.selector reads: the marker would select and deselect the pod in turn, "
    "setting and removing the label forever; use a label the selector does not read"
)
MSG_LABEL_KEYS: Final = (
    "keys must be qualified names: an optional DNS subdomain prefix of at most 253 "
    "characters and '/', then a name of at most 63 alphanumerics, '-', '_' or '.', "
    "starting and ending with an alphanumeric"
)
MSG_LABEL_VALUES: Final = (
    "values must be at most 63 alphanumerics, '-', '_' or '.', starting and ending with "
    "an alphanumeric (or empty)"
)
MSG_ANNOTATION_VALUES: Final = f"values must be at most {MAX_ANNOTATION_VALUE_BYTES} bytes"
MSG_PORT: Final = (
    "must be a port number between 1 and 65535 or a port name (IANA_SVC_NAME: at most 15 "
    "lower-case alphanumerics or '-', with at least one letter, no '--', not starting "
    "or ending with '-')"
)
MSG_SELECTOR_VALUES_REQUIRED: Final = "must be non-empty when operator is In or NotIn"
MSG_SELECTOR_VALUES_FORBIDDEN: Final = "must be empty when operator is Exists or DoesNotExist"
MSG_COMMAND_EMPTY: Final = "must name the program to run: command[0] must not be empty"
