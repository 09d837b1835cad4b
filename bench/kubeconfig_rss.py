"""What connecting through a kubeconfig costs in memory, beside connecting in-cluster.

Each sample is a fresh child process that does what `probemarker run` does before its
informers start: import the daemon (`probemarker.daemon.app`), build the `Connection`
(`load_incluster()` from a service-account directory, or `load_kubeconfig()` from the
sim's kubeconfig, as `--kubeconfig` does), open a `KubeClient` and LIST the pods of an
HTTPS sim with a bearer token (the sim runs in this process, not counted). The child
prints its VmRSS (/proc/self/status) after the LIST; the figure is the median over
`--rounds` children of each kind, the kinds interleaved.

    python bench/kubeconfig_rss.py                 # 5 rounds
    python bench/kubeconfig_rss.py --rounds 11
"""

from __future__ import annotations

import argparse
import asyncio
import platform
import shutil
import statistics
import sys
import tempfile
from pathlib import Path

TOKEN = "bench-token"
MiB = 1 << 20

CHILD = """
import asyncio, sys
from pathlib import Path

async def main(kind, source, port):
    import probemarker.daemon.app  # the daemon's imports, as `probemarker run` makes them
    from probemarker.kube.connect.client import KubeClient
    from probemarker.kube.connect.config import load_incluster, load_kubeconfig
    from probemarker.kube.connect.errors import RequestInfo

    if kind == "kubeconfig":
        connection = await load_kubeconfig(source)
    else:
        environ = {"KUBERNETES_SERVICE_HOST": "127.0.0.1", "KUBERNETES_SERVICE_PORT": port}
        connection = load_incluster(environ=environ, account_dir=Path(source))
    async with KubeClient(connection) as client:
        info = RequestInfo("list", "pods", namespace="default")
        await client.request("GET", "/api/v1/namespaces/default/pods", info=info)
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            print(int(line.split()[1]) * 1024)

asyncio.run(main(*sys.argv[1:]))
"""


async def sample(kind: str, source: str, port: int) -> int:
    process = await asyncio.create_subprocess_exec(
        sys.executable,
        "-c",
        CHILD,
        kind,
        source,
        str(port),
        stdout=asyncio.subprocess.PIPE,
    )
    out, _ = await process.communicate()
    if process.returncode != 0:
        raise SystemExit(f"the {kind} child failed with {process.returncode}")
    return int(out)


async def main(rounds: int) -> None:
    from probemarker.sim import SimCluster

    with tempfile.TemporaryDirectory() as scratch:
        async with SimCluster(https=True, token=TOKEN) as sim:
            assert sim.ca_path is not None
            account = Path(scratch) / "serviceaccount"
            account.mkdir()
            (account / "token").write_text(TOKEN)
            shutil.copy(sim.ca_path, account / "ca.crt")
            sources = {"in-cluster": str(account), "kubeconfig": str(sim.kubeconfig_path)}
            figures: dict[str, list[int]] = {kind: [] for kind in sources}
            for _ in range(rounds):
                for kind, source in sources.items():
                    figures[kind].append(await sample(kind, source, sim.port))
    print(f"python {platform.python_version()}, {rounds} children of each kind")
    medians = {kind: statistics.median(values) for kind, values in figures.items()}
    for kind, values in figures.items():
        print(
            f"{kind:>11}: VmRSS median {medians[kind] / MiB:6.1f} MiB "
            f"(min {min(values) / MiB:.1f}, max {max(values) / MiB:.1f})"
        )
    extra = (medians["kubeconfig"] - medians["in-cluster"]) / MiB
    print(f" difference: {extra:+.1f} MiB for the kubeconfig")
    print(f"reproduce: python bench/kubeconfig_rss.py --rounds {rounds}")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=5, help="children of each kind")
    asyncio.run(main(parser.parse_args().rounds))
