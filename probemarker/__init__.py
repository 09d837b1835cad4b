"""probemarker: custom probes for Kubernetes pods, results written back onto the pod."""

__version__ = "0.1.0"
