"""Regenerate `runtime_v1_pb2.py` from `runtime_v1.proto`.

Stage: development tool, never imported by the daemon. It needs grpcio-tools (in the
`test` extra, pinned there so the output is the same on every machine):

    python -m probemarker.cri.generate

`tests/unit/cri/test_stubs.py` runs `generate` into a scratch directory and fails
when the committed modules differ, so the proto and its stubs cannot drift apart.
Only message classes are generated: the client calls the two methods on their
paths itself (`probemarker.cri.client`), so no grpc stub module is needed, and it
reaches the classes by name, so no type stub (.pyi) is needed either.
"""

from __future__ import annotations

import shutil
import sys
import tempfile
from pathlib import Path

__all__ = ["PROTO", "generate", "main"]

_PACKAGE_DIR = Path(__file__).resolve().parent
_ROOT = _PACKAGE_DIR.parent.parent  # the directory that holds `probemarker/`
PROTO = "probemarker/cri/runtime_v1.proto"  # relative to _ROOT: the descriptor's name
_OUTPUTS = ("runtime_v1_pb2.py",)


def generate(out_dir: Path) -> list[Path]:
    """Write the generated modules into `out_dir` (flat); return their paths."""
    from grpc_tools import protoc  # dev only: the test extra

    with tempfile.TemporaryDirectory() as scratch:
        code = protoc.main(["protoc", f"-I{_ROOT}", f"--python_out={scratch}", PROTO])
        if code != 0:
            raise RuntimeError(f"protoc failed with exit code {code} on {PROTO}")
        out_dir.mkdir(parents=True, exist_ok=True)
        written = []
        for name in _OUTPUTS:
            target = out_dir / name
            shutil.copyfile(Path(scratch, "probemarker", "cri", name), target)
            written.append(target)
        return written


def main() -> int:
    for path in generate(_PACKAGE_DIR):
        print(f"wrote {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
