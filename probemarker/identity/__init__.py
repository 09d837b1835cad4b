"""Identities: the names the stages share from matching on (a floor of its own, below
every stage that uses them; pure).

- `probes`: a probe's identity on a pod (`ProbeKey`: pod UID, container, marker, probe
  name) and the part of it the pod's ownership record names (`OwnerRef`);
- `commands`: the exec-hold record (`HeldCommand`): which command may still run, in
  which instance of its container, since when (`command_digest`, `container_mark`).
"""
