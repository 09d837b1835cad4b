"""Image references as containerd reports them in container statuses.

Docker reference normalization (`busybox` -> `docker.io/library/busybox:latest`)
for `image`, and `<repository>@sha256:<digest>` for `imageID` (the given digest,
or a stable one derived from the normalized name).  Pure.
"""

from __future__ import annotations

import hashlib

__all__ = ["image_id", "normalized_image"]


def normalized_image(image: str) -> str:
    """The image reference as containerd reports it (docker reference normalization:
    `busybox` -> `docker.io/library/busybox:latest`, `me/app:1` -> `docker.io/me/app:1`)."""
    name, at, digest = image.partition("@")
    first, slash, _ = name.partition("/")
    if not slash:
        name = f"docker.io/library/{name}"
    elif not ("." in first or ":" in first or first == "localhost"):
        name = f"docker.io/{name}"
    if not at and ":" not in name.rsplit("/", 1)[-1]:
        name += ":latest"
    return f"{name}@{digest}" if at else name


def image_id(image: str) -> str:
    """`<repository>@sha256:<digest>`: the given digest, or one derived from the name."""
    full = normalized_image(image)
    name, at, digest = full.partition("@")
    last = name.rsplit("/", 1)
    repo = name if ":" not in last[-1] else name[: name.rindex(":")]
    return f"{repo}@{digest if at else 'sha256:' + hashlib.sha256(name.encode()).hexdigest()}"
