"""Marker intake: PodProbeMarker objects from the watch, validated by our own rules.

Stage: watch -> match (the marker side). Input: a marker projection from the
informer. Output: a `Marker`, or an `InvalidMarker` naming every problem. A marker
that got past the API server without the CRD's rules (an older CRD, Kruise's CRD,
rules turned off) is skipped by the engine with a Warning event and one log line
(SPEC §1: the same rules in three places); it never crashes the daemon.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from probemarker.api import rules
from probemarker.api.fields import FieldError
from probemarker.api.model import Marker
from probemarker.api.parse import InvalidMarker, marker_ref_text, parse_marker
from probemarker.kube.projection import projector
from probemarker.kube.resources import Resource

KIND = "PodProbeMarker"


def marker_resource(group: str = rules.GROUP) -> Resource:
    """Ours (probemarker.io) or, opted in, Kruise's (apps.kruise.io); same spec."""
    return Resource(group, rules.VERSION, rules.PLURAL)


# What the daemon keeps of a marker: identity, generation, spec.
marker_projection = projector(("apiVersion", "kind", "metadata.generation", "spec"))


def read_marker(doc: Mapping[str, Any], *, api_version: str = rules.API_VERSION) -> Marker:
    """The validated marker, or `InvalidMarker`. List items may lack apiVersion and
    kind (core lists omit them), so the watched resource's are filled in."""
    full = {"apiVersion": api_version, "kind": KIND, **doc}
    try:
        return parse_marker(full)
    except InvalidMarker:
        raise
    except (KeyError, TypeError, ValueError) as err:  # a shape validation did not foresee
        problem = FieldError("spec", f"cannot be read ({err!r}); check it with `probemarker validate`")
        raise InvalidMarker(marker_ref_text(full), (problem,)) from err
