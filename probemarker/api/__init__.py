"""The PodProbeMarker API: model, rules, validation, parsing and the CRD (all pure)."""
