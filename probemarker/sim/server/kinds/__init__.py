"""The built-in kinds' own rules, as k8s.io/kubernetes' pkg/apis states them: what a pod,
namespace or node gets on create (`defaults`, with a pod's QoS class in `qos`), the
checks of an Event (`eventcheck`), and the one event served through two APIs, core/v1
and events.k8s.io/v1 (`eventconv`). Pure functions, inputs never mutated.

Above `request/` (a refused default is a Status), below the rooms that apply them;
the kubelet reports a pod's QoS class from `qos` too.
"""
