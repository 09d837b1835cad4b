#!/usr/bin/env bash
# Build the probemarker image from this checkout with podman, then check it without
# running a container (docs/image.md).
#
#   1. base: unless --base IMAGE names one, a Debian bookworm base made with
#      `mmdebstrap --variant=minbase --include=python3,python3-venv,ca-certificates`
#      and `podman import`ed as $BASE_NAME (made once; --rebuild-base makes it again);
#   2. build: `podman build --isolation chroot` of ./Containerfile, the CA bundle (and a
#      pip configuration, if given) passed as build secrets: pip reads them during the
#      build, no layer keeps them;
#   3. verify (root only: it mounts the image): `podman image mount`, then on an overlay
#      over it, through `chroot` with the image's USER, ENV and ENTRYPOINT:
#      `probemarker --version`, `probemarker run --help`, an import of every daemon
#      module as root with bytecode writing on (a missing or stale .pyc would be
#      written), and, where the simulated API server can run (a Python with
#      probemarker[sim] and kubectl), the daemon itself: in-cluster configuration from a
#      mounted service-account directory, NODE_NAME set, until an exec probe's label
#      lands on a pod, then SIGTERM and exit 0. Nothing may appear in the overlay's upper
#      directory: the image runs on a read-only root file system; and the sim extra's
#      modules (kubernetes_asyncio, cel-python, ...) must not be importable in it;
#   4. the image's size, and (root) what /opt/probemarker holds, largest first.
#
# Usage: hack/build-image.sh [options]
#   --image NAME        image name            [$PROBEMARKER_IMAGE; localhost/probemarker]
#   --tag TAG           image tag             [$PROBEMARKER_IMAGE_TAG; the package version]
#   --base IMAGE        an existing base image with python3 (3.11+) and its venv module,
#                       used as is (no mmdebstrap) [$PROBEMARKER_BASE_IMAGE]
#   --base-name NAME    the name the mmdebstrap base is imported as
#                       [$PROBEMARKER_BASE_NAME; localhost/probemarker-base:bookworm]
#   --rebuild-base      make the mmdebstrap base again even if it exists
#   --ca FILE|none      CA bundle pip trusts during the build [$PROBEMARKER_BUILD_CA;
#                       /etc/ssl/certs/ca-certificates.crt when it exists]
#   --pip-conf FILE     pip configuration for the build (an index or a mirror)
#                       [$PROBEMARKER_BUILD_PIP_CONF; none: pip's default, PyPI]
#   --isolation MODE    podman build --isolation [$PROBEMARKER_BUILD_ISOLATION; chroot]
#   --no-cache          build every step anew and keep no intermediate image
#                       (podman build --layers=false); the base is still reused
#   --no-verify         build only
#   --smoke auto|yes|no run the daemon from the image against the sim [auto: when the
#                       sim's Python and kubectl are there]
#   --sim-python PATH   a Python with probemarker[sim] [$PROBEMARKER_SIM_PYTHON; python3];
#                       it imports this checkout (PYTHONPATH)
#   -h, --help
set -euo pipefail

repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
self="$repo/hack/build-image.sh"

say() { printf '==> %s\n' "$*" >&2; }
fail() { printf 'build-image: %s\n' "$*" >&2; exit 1; }

# ---------------------------------------------------------------------------------------
# Step 3, inside a private mount namespace (`unshare --mount`): every mount made here is
# gone when it exits. Called as: build-image.sh __verify MOUNTED_IMAGE (settings in env).
# ---------------------------------------------------------------------------------------
verify_inside() {
  local image_root="$1" work
  work="$(mktemp -d)"
  local root="$work/root" upper="$work/upper" points="$work/points" account="$work/account"
  mkdir -p "$root" "$upper" "$work/overlay-work" "$points" "$account"

  # The kubelet mounts the service account at /var/run/secrets/kubernetes.io/serviceaccount;
  # in Debian /var/run is a link to /run. Its mount point comes from an extra lower layer,
  # so that creating it is no write of the image's.
  local account_dir=var/run/secrets/kubernetes.io/serviceaccount
  if [[ -L "$image_root/var/run" ]]; then account_dir=run/secrets/kubernetes.io/serviceaccount; fi
  mkdir -p "$points/$account_dir"
  mount -t overlay overlay \
    -o "lowerdir=$points:$image_root,upperdir=$upper,workdir=$work/overlay-work" "$root"
  mount -t proc proc "$root/proc"
  mount --bind /dev "$root/dev"

  local -a image_env entry
  mapfile -t image_env < <(printf '%s\n' "$VERIFY_ENV" | sed '/^$/d')
  mapfile -t entry < <(printf '%s\n' "$VERIFY_ENTRYPOINT" | sed '/^$/d')
  [[ ${#entry[@]} -ge 2 && "${entry[1]}" == run ]] ||
    fail "the image's ENTRYPOINT is '${entry[*]}', expected '<path>/probemarker run'"
  local user="$VERIFY_USER"
  [[ "$user" =~ ^[0-9]+:[0-9]+$ ]] || fail "the image's USER is '$user', expected numeric UID:GID"
  local python="${entry[0]%/*}/python"
  as_user() { env -i "${image_env[@]}" chroot --userspec="$user" "$root" "$@"; }

  local version
  version="$(as_user "${entry[0]}" --version)"
  [[ "$version" == "probemarker $VERIFY_VERSION" ]] ||
    fail "probemarker --version said '$version', expected 'probemarker $VERIFY_VERSION'"
  say "as $user: ${entry[0]} --version -> $version"

  local help
  help="$(as_user "${entry[@]}" --help)" || fail "probemarker run --help failed: $help"
  grep -q -- '--shutdown-grace-seconds' <<<"$help" ||
    fail "probemarker run --help does not list the settings: $help"
  say "as $user: ${entry[*]} --help -> $(wc -l <<<"$help") lines, every setting listed"

  # As root, bytecode writing on: an import of a module whose .pyc is missing or stale
  # would write one, and the upper directory would show it. Every module but the sim's
  # and the demo's (they need the sim extra, which the image does not install).
  env -i "${image_env[@]}" PYTHONDONTWRITEBYTECODE= chroot "$root" "$python" -c '
import importlib, pkgutil, probemarker
skip = ("probemarker.sim", "probemarker.demo", "probemarker.__main__")
names = [m.name for m in pkgutil.walk_packages(probemarker.__path__, "probemarker.")
         if not m.name.startswith(skip)]
for name in names: importlib.import_module(name)
import grpc, grpc_health.v1.health_pb2_grpc
print(len(names))' >"$work/imported" || fail "importing the daemon's modules failed"
  say "as root, bytecode writing on: imported $(cat "$work/imported") probemarker modules and grpc"

  # What the image must not carry: the sim extra (kubernetes_asyncio is the demo's, the
  # sim's and the tests' client; the daemon talks to the API server with aiohttp), which
  # would be half of /opt/probemarker. Each import must fail, as the image's user.
  local absent
  absent="$(as_user "$python" -c '
import importlib
found = []
for name in ("kubernetes_asyncio", "celpy", "lark", "re2", "cryptography"):
    try:
        importlib.import_module(name)
    except ModuleNotFoundError:
        continue
    found.append(name)
print(" ".join(found) or "none")')" || fail "checking for the sim extra's modules failed: $absent"
  [[ "$absent" == none ]] ||
    fail "the image carries the sim extra's $absent (pyproject.toml: [project] dependencies)"
  say "as $user: import kubernetes_asyncio, celpy, lark, re2, cryptography: each not found (no sim extra)"

  if [[ "$VERIFY_SMOKE" == yes ]]; then
    smoke_run
  fi

  umount "$root/dev" "$root/proc" "$root"
  local written count
  written="$(cd "$upper" && find . -mindepth 1)"
  if [[ -n "$written" ]]; then
    count="$(wc -l <<<"$written")"
    fail "the image wrote $count files or directories to its root file system, e.g.:
$(sed -n '1,15p' <<<"$written")"
  fi
  say "nothing was written to the image's file system (overlay upper directory empty)"
  rm -rf "$work"
}

# The daemon from the image against the simulated API server on this host: the way the
# DaemonSet runs it (in-cluster configuration, NODE_NAME, the image's user), until the
# first probe result is on the pod, then SIGTERM.
smoke_run() {
  local kubeconfig="$work/kubeconfig" token sim daemon port rc=0
  token="smoke-$RANDOM$RANDOM"
  PYTHONPATH="$repo" "$VERIFY_SIM_PYTHON" -m probemarker sim serve --port 0 --https \
    --token "$token" --kubeconfig-out "$kubeconfig" >"$work/sim.log" 2>&1 &
  sim=$!
  for _ in $(seq 300); do [[ -s "$kubeconfig" ]] && break; sleep 0.1; done
  [[ -s "$kubeconfig" ]] || { kill "$sim"; fail "the sim did not start: $(tail -5 "$work/sim.log")"; }
  local k=(kubectl --kubeconfig "$kubeconfig")
  port="$("${k[@]}" config view --raw -o jsonpath='{.clusters[0].cluster.server}')"
  port="${port##*:}"
  printf '%s' "$token" >"$account/token"
  "${k[@]}" config view --raw -o jsonpath='{.clusters[0].cluster.certificate-authority-data}' |
    base64 -d >"$account/ca.crt"
  printf 'default' >"$account/namespace"
  chmod 0755 "$account" && chmod 0644 "$account"/*
  mount --bind -o ro "$account" "$root/$account_dir"

  "${k[@]}" apply -f "$repo/manifests/crd/" >/dev/null
  "${k[@]}" wait crd/podprobemarkers.probemarker.io --for condition=established --timeout=60s >/dev/null
  "${k[@]}" apply -f - >/dev/null <<'EOF'
apiVersion: v1
kind: Pod
metadata: {name: smoke-0, namespace: default, labels: {app: smoke}}
spec:
  nodeName: node-1
  containers: [{name: app, image: smoke:1}]
---
apiVersion: probemarker.io/v1alpha1
kind: PodProbeMarker
metadata: {name: smoke, namespace: default}
spec:
  selector: {matchLabels: {app: smoke}}
  probes:
  - name: answer
    containerName: app
    probe: {exec: {command: [echo, ok]}, periodSeconds: 1}
    markerPolicy:
    - {state: Succeeded, labels: {smoke: ok}}
EOF
  # The one difference from the DaemonSet: the health and metrics server on a free port
  # of this host's loopback (the chroot shares the host's network), not on :9808.
  env -i "${image_env[@]}" KUBERNETES_SERVICE_HOST=127.0.0.1 KUBERNETES_SERVICE_PORT="$port" \
    NODE_NAME=node-1 PROBEMARKER_LOG_FORMAT=json PROBEMARKER_METRICS_ADDRESS=127.0.0.1:0 \
    chroot --userspec="$user" "$root" "${entry[@]}" >"$work/daemon.log" 2>&1 &
  daemon=$!
  if ! "${k[@]}" wait pod/smoke-0 --for=jsonpath='{.metadata.labels.smoke}'=ok --timeout=60s >/dev/null; then
    kill "$daemon" "$sim" 2>/dev/null || true
    fail "the daemon from the image did not label the pod within 60 s; its log: $(tail -20 "$work/daemon.log")"
  fi
  # Its /healthz, /readyz and /metrics, on the port its `metrics.serving` line names
  # (a daemon without the server says so and passes).
  local endpoints
  if ! endpoints="$("$VERIFY_SIM_PYTHON" - "$work/daemon.log" 2>&1 <<'EOF'
import json, sys, urllib.error, urllib.request
port = None
for line in open(sys.argv[1]):
    try:
        entry = json.loads(line)
    except ValueError:
        continue
    if isinstance(entry, dict) and entry.get("event") == "metrics.serving":
        port = entry.get("port")
if port is None:
    print("no health and metrics server in this daemon")
    sys.exit(0)
said = []
for path in ("/healthz", "/readyz", "/metrics"):
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}{path}", timeout=5) as answer:
            status, body = answer.status, answer.read().decode()
    except urllib.error.HTTPError as error:
        status, body = error.code, error.read().decode()
    if status != 200 or (path == "/metrics" and "probemarker_" not in body):
        print(f"{path} answered {status}: {body[:300]}")
        sys.exit(1)
    said.append(f"{path} 200")
print(", ".join(said))
EOF
  )"; then
    kill "$daemon" "$sim" 2>/dev/null || true
    fail "the image's daemon's health and metrics endpoints: $endpoints"
  fi

  # The resident memory of the image's daemon (one pod, one probe): beside the figures
  # of bench/daemonset_resources.py, which runs the daemon from a checkout.
  local rss
  rss="$(awk '/^VmRSS|^VmHWM/ {printf "%s %.1f MiB ", $1, $2 / 1024}' "/proc/$daemon/status")"
  kill -TERM "$daemon"
  wait "$daemon" || rc=$?
  kill "$sim" 2>/dev/null || true
  wait "$sim" 2>/dev/null || true
  [[ $rc -eq 0 ]] || fail "the daemon exited $rc after SIGTERM; its log: $(tail -20 "$work/daemon.log")"
  umount "$root/$account_dir"
  say "as $user, in-cluster config, NODE_NAME=node-1: the daemon labelled pod smoke-0 from an exec probe, then exited 0 on SIGTERM ($(wc -l <"$work/daemon.log") log lines; ${rss% }); $endpoints"
}

if [[ "${1:-}" == __verify ]]; then
  # A failed check leaves no sim or daemon behind (they would keep the namespace).
  trap 'jobs -p | xargs -r kill 2>/dev/null || true' EXIT
  verify_inside "$2"
  exit 0
fi

# ---------------------------------------------------------------------------------------
# Options
# ---------------------------------------------------------------------------------------
version="$(sed -n 's/^__version__ = "\(.*\)"$/\1/p' "$repo/probemarker/__init__.py")"
[[ -n "$version" ]] || fail "no __version__ in $repo/probemarker/__init__.py"
image="${PROBEMARKER_IMAGE:-localhost/probemarker}"
tag="${PROBEMARKER_IMAGE_TAG:-$version}"
base="${PROBEMARKER_BASE_IMAGE:-}"
base_name="${PROBEMARKER_BASE_NAME:-localhost/probemarker-base:bookworm}"
rebuild_base=no
ca="${PROBEMARKER_BUILD_CA:-}"
if [[ -z "$ca" && -s /etc/ssl/certs/ca-certificates.crt ]]; then ca=/etc/ssl/certs/ca-certificates.crt; fi
pip_conf="${PROBEMARKER_BUILD_PIP_CONF:-}"
isolation="${PROBEMARKER_BUILD_ISOLATION:-chroot}"
verify=yes
layers=true
smoke=auto
sim_python="${PROBEMARKER_SIM_PYTHON:-python3}"

usage() { sed -n '2,/^set -euo/p' "$self" | sed '$d' | sed 's/^# \{0,1\}//'; }
value() { [[ $# -ge 2 && -n "$2" ]] || fail "$1 needs a value (--help)"; printf '%s' "$2"; }
while [[ $# -gt 0 ]]; do
  case "$1" in
    --image) image="$(value "$@")"; shift 2 ;;
    --tag) tag="$(value "$@")"; shift 2 ;;
    --base) base="$(value "$@")"; shift 2 ;;
    --base-name) base_name="$(value "$@")"; shift 2 ;;
    --rebuild-base) rebuild_base=yes; shift ;;
    --ca) ca="$(value "$@")"; shift 2 ;;
    --pip-conf) pip_conf="$(value "$@")"; shift 2 ;;
    --isolation) isolation="$(value "$@")"; shift 2 ;;
    --no-verify) verify=no; shift ;;
    --no-cache) layers=false; shift ;;
    --smoke) smoke="$(value "$@")"; shift 2 ;;
    --sim-python) sim_python="$(value "$@")"; shift 2 ;;
    -h | --help) usage; exit 0 ;;
    *) fail "unknown argument '$1' (--help lists the options)" ;;
  esac
done
[[ "$ca" == none ]] && ca=""
[[ -z "$ca" || -s "$ca" ]] || fail "--ca $ca: no such file (or empty); pass a CA bundle, or none"
[[ -z "$pip_conf" || -s "$pip_conf" ]] || fail "--pip-conf $pip_conf: no such file (or empty)"
[[ "$smoke" =~ ^(auto|yes|no)$ ]] || fail "--smoke $smoke: must be auto, yes or no"
command -v podman >/dev/null || fail "podman is not installed (Debian: apt-get install podman)"
full="$image:$tag"

# ---------------------------------------------------------------------------------------
# 1. The base
# ---------------------------------------------------------------------------------------
if [[ -z "$base" ]]; then
  base="$base_name"
  if [[ "$rebuild_base" == no ]] && podman image exists "$base"; then
    say "base: $base (exists; --rebuild-base makes it again)"
  else
    command -v mmdebstrap >/dev/null ||
      fail "mmdebstrap is not installed (Debian: apt-get install mmdebstrap), or pass --base IMAGE"
    scratch="$(mktemp -d)"
    trap 'rm -rf -- "$scratch"' EXIT
    say "base: mmdebstrap bookworm (minbase, python3, python3-venv, ca-certificates)"
    # /usr merged by mmdebstrap's hook (the directory links debootstrap makes), not by
    # the usrmerge package, which would pull in perl (about 50 MB); no manuals,
    # documentation (but the copyright files) or translations: nothing in the image
    # reads them.
    hooks=()
    merged_usr=/usr/share/mmdebstrap/hooks/merged-usr
    [[ -d "$merged_usr" ]] && hooks=(--hook-dir="$merged_usr")
    mmdebstrap --quiet --variant=minbase --include=python3,python3-venv,ca-certificates \
      "${hooks[@]}" \
      --dpkgopt='path-exclude=/usr/share/man/*' --dpkgopt='path-exclude=/usr/share/info/*' \
      --dpkgopt='path-exclude=/usr/share/doc/*' --dpkgopt='path-include=/usr/share/doc/*/copyright' \
      --dpkgopt='path-exclude=/usr/share/locale/*' \
      bookworm "$scratch/base.tar"
    podman import --quiet \
      --change 'ENV PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin' \
      --change 'CMD ["/bin/bash"]' "$scratch/base.tar" "$base" >/dev/null
    rm -rf -- "$scratch"
    trap - EXIT
    say "base: imported as $base"
  fi
fi
podman image exists "$base" || fail "base image $base does not exist here (podman pull it first)"

# ---------------------------------------------------------------------------------------
# 2. The build
# ---------------------------------------------------------------------------------------
revision="$(git -C "$repo" rev-parse HEAD 2>/dev/null || echo unknown)"
if [[ "$revision" != unknown && -n "$(git -C "$repo" status --porcelain 2>/dev/null)" ]]; then
  revision="$revision-dirty"
fi
build=(podman build --isolation "$isolation" --layers="$layers" --file "$repo/Containerfile" --tag "$full"
  --build-arg "BASE_IMAGE=$base" --build-arg "VERSION=$version"
  --label "org.opencontainers.image.revision=$revision"
  --label "org.opencontainers.image.created=$(date -u +%Y-%m-%dT%H:%M:%SZ)")
[[ -n "$ca" ]] && build+=(--secret "id=hostca,src=$ca")
[[ -n "$pip_conf" ]] && build+=(--secret "id=pipconf,src=$pip_conf")
say "build: $full on $base${ca:+ (pip trusts $ca)}${pip_conf:+ (pip config $pip_conf)}"
"${build[@]}" "$repo"

# ---------------------------------------------------------------------------------------
# 3. Verify
# ---------------------------------------------------------------------------------------
if [[ "$verify" == yes ]]; then
  [[ "$(id -u)" == 0 ]] ||
    fail "verifying mounts the image and needs root; run as root, or pass --no-verify"
  if [[ "$smoke" == auto ]]; then
    if command -v kubectl >/dev/null &&
      PYTHONPATH="$repo" "$sim_python" -c 'import probemarker.sim.cli, cryptography' 2>/dev/null; then
      smoke=yes
    else
      smoke=no
      say "smoke run skipped: needs kubectl and a Python with probemarker[sim] (--sim-python)"
    fi
  fi
  export VERIFY_ENV VERIFY_ENTRYPOINT VERIFY_USER VERIFY_VERSION="$version" \
    VERIFY_SMOKE="$smoke" VERIFY_SIM_PYTHON="$sim_python"
  VERIFY_ENV="$(podman image inspect --format '{{range .Config.Env}}{{println .}}{{end}}' "$full")"
  VERIFY_ENTRYPOINT="$(podman image inspect --format '{{range .Config.Entrypoint}}{{println .}}{{end}}' "$full")"
  VERIFY_USER="$(podman image inspect --format '{{.Config.User}}' "$full")"
  mounted="$(podman image mount "$full")"
  trap 'podman image unmount "$full" >/dev/null' EXIT
  say "verify: $full mounted at $mounted"
  unshare --mount --propagation private "$self" __verify "$mounted"
  podman image unmount "$full" >/dev/null
  trap - EXIT
fi

# ---------------------------------------------------------------------------------------
# 4. Size
# ---------------------------------------------------------------------------------------
size="$(podman image inspect --format '{{.Size}}' "$full")"
base_size="$(podman image inspect --format '{{.Size}}' "$base")"
say "image $full: $((size / 1000000)) MB ($((size / 1048576)) MiB), of which the base $base: $((base_size / 1000000)) MB"
# What /opt/probemarker holds, largest first (root: it mounts the image): the figures of
# docs/image.md. Apparent sizes, as the image's layers count them, in MB.
if [[ "$(id -u)" == 0 ]]; then
  mounted="$(podman image mount "$full")"
  site="$(echo "$mounted"/opt/probemarker/lib/python3*/site-packages)"
  opt_mb="$(du -s --apparent-size --block-size=1MB "$mounted/opt/probemarker" | cut -f1)"
  largest="$(cd "$site" && du -s --apparent-size --block-size=1kB -- * |
    sort -rn | head -8 | awk '{printf "%s%s %.1f", (NR > 1 ? ", " : ""), $2, $1 / 1000}')"
  podman image unmount "$full" >/dev/null
  say "/opt/probemarker: $opt_mb MB; largest in site-packages (MB): $largest"
fi
printf '%s\n' "$full"
