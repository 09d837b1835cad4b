#!/usr/bin/env bash
# A real container runtime for the tests that need one (pytest marker `cri`): Debian's
# containerd and runc, its CRI plugin on a private socket, and a busybox image built here
# from Debian's busybox-static (no registry, no network, no CNI, no systemd). Root only.
#
#   install           apt-get install containerd, runc and busybox-static where missing
#   start STATE_DIR   a containerd whose files all live under STATE_DIR (made if absent,
#                     must be empty), the busybox image imported into the CRI namespace
#                     and used as the sandbox image too; waits until the CRI plugin
#                     answers `Version` (at most $PROBEMARKER_CRI_WAIT seconds, 90), then
#                     prints, one per line, for the tests (`export` them):
#                       PROBEMARKER_TEST_CRI_ENDPOINT=unix:///.../containerd.sock
#                       PROBEMARKER_TEST_CRI_STATE=STATE_DIR
#   stop STATE_DIR    stops and removes every sandbox and container, kills containerd and
#                     its shims, unmounts what is mounted under STATE_DIR, removes the
#                     cgroups its pods used and STATE_DIR itself: nothing is left behind
#   down STATE_DIR [--kill]
#                     stops containerd only (SIGTERM: it removes its socket, a client
#                     gets "No such file or directory"; --kill: SIGKILL, the socket file
#                     stays and a client gets "Connection refused"); the containers keep
#                     running under their shims
#   up STATE_DIR      starts containerd again with the same configuration and waits for
#                     `Version`; it reconnects to the running containers
#
# The recipe (docs/development.md, "The container runtime harness"): the CRI plugin with
# `restrict_oom_score_adj = true` (this VM lacks CAP_SYS_RESOURCE; without it
# RunPodSandbox fails with "can't get final child's PID from pipe"), runc with the
# cgroupfs driver (SystemdCgroup = false; pods give a relative cgroup_parent), and pods on
# the host network (no CNI call), without a hostname. Unix socket paths are limited to
# 108 bytes, so the socket and containerd's state live in a short directory: STATE_DIR/run
# when STATE_DIR is short, else a `mktemp -d /run/pmcri.XXXXXX` recorded in STATE_DIR.
#
# Readiness is a CRI `Version` call made by a Python with grpcio ($PROBEMARKER_CRI_PYTHON,
# else `python3`; the test environment has grpcio).
set -euo pipefail

readonly IMAGE="localhost/probemarker/busybox:cri-test"
# The cgroup every test pod asks for (relative: under the cgroup of containerd's shim);
# `stop` removes it where it is empty. tests/cri/runtime.py uses the same name.
readonly POD_CGROUP="probemarker-cri-test"

say() { printf '==> %s\n' "$*" >&2; }
fail() { printf 'cri-runtime: %s\n' "$*" >&2; exit 1; }

usage() {  # usage [EXIT_CODE]: the header above, on stderr for a mistake
  local code="${1:-2}"
  if ((code == 0)); then
    sed -n '2,/^set -euo/{/^set -euo/d;s/^# \{0,1\}//;p}' "${BASH_SOURCE[0]}"
  else
    sed -n '2,/^set -euo/{/^set -euo/d;s/^# \{0,1\}//;p}' "${BASH_SOURCE[0]}" >&2
  fi
  exit "$code"
}

require_root() {
  [[ "$(id -u)" == 0 ]] || fail "$1 needs root (containerd mounts file systems and makes cgroups); run it as root or with sudo"
}

# ---------------------------------------------------------------------------------------
# install
# ---------------------------------------------------------------------------------------
cmd_install() {
  require_root install
  local missing=()
  command -v containerd >/dev/null && command -v ctr >/dev/null || missing+=(containerd)
  command -v runc >/dev/null || missing+=(runc)
  [[ -x /bin/busybox ]] || missing+=(busybox-static)
  if ((${#missing[@]} == 0)); then
    say "containerd, runc and busybox-static are installed"
    return
  fi
  command -v apt-get >/dev/null || fail "apt-get not found: install ${missing[*]} with this system's package manager"
  say "apt-get install ${missing[*]}"
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq >/dev/null || fail "apt-get update failed"
  apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null \
    || fail "apt-get install ${missing[*]} failed"
}

# ---------------------------------------------------------------------------------------
# Paths: everything under STATE_DIR; the socket and containerd's state under a short
# directory ($run) because of the 108-byte limit on unix socket paths.
# ---------------------------------------------------------------------------------------
resolve_paths() {
  state_dir="$1"
  config="$state_dir/containerd.toml"
  log="$state_dir/containerd.log"
  pidfile="$state_dir/containerd.pid"
  if [[ -f "$state_dir/short-run-dir" ]]; then
    run="$(cat "$state_dir/short-run-dir")"
  else
    run="$state_dir/run"
  fi
  socket="$run/containerd.sock"
}

containerd_pid() {
  local pid
  [[ -f "$pidfile" ]] || return 1
  pid="$(cat "$pidfile")"
  alive "$pid" && [[ "$(cat "/proc/$pid/comm" 2>/dev/null)" == containerd ]] || return 1
  echo "$pid"
}

alive() {  # a process that exists and is not a zombie waiting for its parent to reap it
  local stat
  stat="$(cat "/proc/$1/stat" 2>/dev/null)" || return 1
  stat="${stat##*) }"
  [[ "${stat%% *}" != Z ]]
}

write_config() {
  local root="$state_dir/root"
  # Plugins that would touch paths outside STATE_DIR (/opt/containerd) or need what
  # this VM has not got are disabled; overlayfs is the snapshotter.
  cat >"$config" <<EOF
version = 2
root = "$root"
state = "$run/state"
disabled_plugins = [
  "io.containerd.internal.v1.opt",
  "io.containerd.snapshotter.v1.aufs",
  "io.containerd.snapshotter.v1.btrfs",
  "io.containerd.snapshotter.v1.devmapper",
  "io.containerd.snapshotter.v1.zfs",
  "io.containerd.tracing.processor.v1.otlp",
  "io.containerd.internal.v1.tracing",
]

[grpc]
  address = "$socket"

[debug]
  level = "info"

[plugins."io.containerd.grpc.v1.cri"]
  sandbox_image = "$IMAGE"
  restrict_oom_score_adj = true
  stream_server_address = "127.0.0.1"
  stream_server_port = "0"
  enable_selinux = false
  [plugins."io.containerd.grpc.v1.cri".cni]
    bin_dir = "$state_dir/cni/bin"
    conf_dir = "$state_dir/cni/net.d"
  [plugins."io.containerd.grpc.v1.cri".containerd]
    snapshotter = "overlayfs"
    default_runtime_name = "runc"
    [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]
      runtime_type = "io.containerd.runc.v2"
      [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc.options]
        SystemdCgroup = false
        Root = "$run/runc"
EOF
}

# ---------------------------------------------------------------------------------------
# The image: an OCI image layout made by hand (one uncompressed layer with bin/busybox and
# a symlink per applet), archived as a tar that `ctr images import` takes.
# ---------------------------------------------------------------------------------------
sha256_of() { sha256sum "$1" | cut -d' ' -f1; }

add_blob() {  # add_blob FILE -> prints its digest; the blob goes into the layout
  local digest
  digest="$(sha256_of "$1")"
  mv "$1" "$layout/blobs/sha256/$digest"
  echo "$digest"
}

build_image() {
  local work="$state_dir/image" rootfs layer_digest config_digest manifest_digest
  local config_size manifest_size layer_size applet arch
  layout="$work/layout"
  rootfs="$work/rootfs"
  mkdir -p "$rootfs/bin" "$rootfs/etc" "$rootfs/tmp" "$rootfs/proc" "$rootfs/sys" \
    "$rootfs/dev" "$layout/blobs/sha256"
  chmod 1777 "$rootfs/tmp"
  cp /bin/busybox "$rootfs/bin/busybox"
  for applet in $(/bin/busybox --list); do
    [[ "$applet" == busybox ]] || ln -s busybox "$rootfs/bin/$applet"
  done
  printf 'root:x:0:0:root:/:/bin/sh\nnobody:x:65534:65534:nobody:/:/bin/false\n' >"$rootfs/etc/passwd"
  printf 'root:x:0:\nnobody:x:65534:\n' >"$rootfs/etc/group"
  tar --sort=name --owner=0 --group=0 --numeric-owner --mtime=@0 -C "$rootfs" \
    -cf "$work/layer.tar" .
  layer_size="$(stat -c %s "$work/layer.tar")"
  layer_digest="$(add_blob "$work/layer.tar")"

  case "$(uname -m)" in
    x86_64) arch=amd64 ;;
    aarch64) arch=arm64 ;;
    *) arch="$(uname -m)" ;;
  esac
  # The default process keeps a pod sandbox alive: the sandbox runs the image's command
  # (it stands in for the pause image) and must not exit.
  printf '%s' "{\"architecture\":\"$arch\",\"os\":\"linux\",\"config\":{\"Env\":[\"PATH=/bin\"],\"Cmd\":[\"sleep\",\"2147483647\"],\"WorkingDir\":\"/\"},\"rootfs\":{\"type\":\"layers\",\"diff_ids\":[\"sha256:$layer_digest\"]}}" >"$work/config.json"
  config_size="$(stat -c %s "$work/config.json")"
  config_digest="$(add_blob "$work/config.json")"

  printf '%s' "{\"schemaVersion\":2,\"mediaType\":\"application/vnd.oci.image.manifest.v1+json\",\"config\":{\"mediaType\":\"application/vnd.oci.image.config.v1+json\",\"digest\":\"sha256:$config_digest\",\"size\":$config_size},\"layers\":[{\"mediaType\":\"application/vnd.oci.image.layer.v1.tar\",\"digest\":\"sha256:$layer_digest\",\"size\":$layer_size}]}" >"$work/manifest.json"
  manifest_size="$(stat -c %s "$work/manifest.json")"
  manifest_digest="$(add_blob "$work/manifest.json")"

  printf '{"imageLayoutVersion":"1.0.0"}' >"$layout/oci-layout"
  printf '%s' "{\"schemaVersion\":2,\"mediaType\":\"application/vnd.oci.image.index.v1+json\",\"manifests\":[{\"mediaType\":\"application/vnd.oci.image.manifest.v1+json\",\"digest\":\"sha256:$manifest_digest\",\"size\":$manifest_size,\"platform\":{\"architecture\":\"$arch\",\"os\":\"linux\"},\"annotations\":{\"io.containerd.image.name\":\"$IMAGE\",\"org.opencontainers.image.ref.name\":\"${IMAGE##*:}\"}}]}" >"$layout/index.json"
  tar --owner=0 --group=0 --numeric-owner -C "$layout" -cf "$work/image.tar" .
}

# ---------------------------------------------------------------------------------------
# containerd
# ---------------------------------------------------------------------------------------
python_with_grpc() {
  local py="${PROBEMARKER_CRI_PYTHON:-python3}"
  "$py" -c 'import grpc' 2>/dev/null \
    || fail "$py cannot import grpc: the readiness check calls CRI Version with grpcio; set PROBEMARKER_CRI_PYTHON to a Python that has it (the test environment: pip install -e '.[test]')"
  echo "$py"
}

# One CRI Version call; prints "runtime_name runtime_version runtime_api_version".
# The request is an empty message, the answer is decoded by hand (strings 2, 3, 4).
cri_version() {
  "$1" - "$2" <<'EOF'
import sys, grpc
target = sys.argv[1]
with grpc.insecure_channel(target) as channel:
    call = channel.unary_unary("/runtime.v1.RuntimeService/Version")
    raw = call(b"", timeout=5)
fields, i = {}, 0
while i < len(raw):
    key = raw[i]; i += 1
    size, shift = 0, 0
    while True:
        b = raw[i]; i += 1
        size |= (b & 0x7F) << shift; shift += 7
        if b < 0x80: break
    fields[key >> 3] = raw[i:i + size].decode(); i += size
print(fields.get(2, "?"), fields.get(3, "?"), fields.get(4, "?"))
EOF
}

launch_containerd() {
  : >>"$log"
  # setsid: containerd and (through it) the shims leave this shell's process group, so
  # the caller's job control or Ctrl-C does not reach them; `stop` ends them.
  setsid containerd --config "$config" >>"$log" 2>&1 </dev/null &
  echo $! >"$pidfile"
  launched="$(date +%s)"
  deadline=$((launched + ${PROBEMARKER_CRI_WAIT:-90}))
}

# A start (or up) that failed: the log's tail, containerd stopped, the directory kept.
launch_failed() {
  local pid
  tail -n 30 "$log" >&2 || true
  if pid="$(containerd_pid)"; then
    kill -KILL "$pid" 2>/dev/null || true
    # SIGKILL is asynchronous: on a busy machine the process runs on for a moment.
    # "containerd stopped" holds when this returns, not some time after.
    for _ in $(seq 1 50); do alive "$pid" || break; sleep 0.1; done
  fi
  fail "$1 (containerd log above: $log); '$0 stop $state_dir' removes what is left"
}

# wait_for WHAT COMMAND...: until COMMAND succeeds; a clear failure when containerd exits
# or $PROBEMARKER_CRI_WAIT seconds (90) have passed since launch_containerd.
wait_for() {
  local what="$1"
  shift
  until "$@" >/dev/null 2>&1; do
    containerd_pid >/dev/null || launch_failed "containerd exited before $what"
    (($(date +%s) < deadline)) || launch_failed "no $what within ${PROBEMARKER_CRI_WAIT:-90} s"
    sleep 0.2
  done
}

# ctr on this containerd, in the CRI plugin's namespace (k8s.io). ctr would wait 10 s
# for a socket that is not there; 2 s is plenty for one that is.
ctr_k8s() { ctr --connect-timeout 2s -a "$socket" -n k8s.io "$@"; }

containerd_answers() { [[ -S "$socket" ]] && ctr_k8s version; }

wait_for_cri() {
  local py="$1"
  wait_for "answer from the CRI plugin to Version on unix://$socket" \
    cri_version "$py" "unix://$socket"
  say "CRI answers: $(cri_version "$py" "unix://$socket") after $(($(date +%s) - launched)) s"
}

cmd_start() {
  require_root start
  local py tool
  py="$(python_with_grpc)"
  for tool in containerd ctr runc; do
    command -v "$tool" >/dev/null || fail "$tool not found: run '$0 install' first"
  done
  [[ -x /bin/busybox ]] || fail "/bin/busybox not found: run '$0 install' first"
  state_dir="$(realpath -m "$1")"
  [[ "$state_dir" != *[\"\\[:space:]]* ]] \
    || fail "$state_dir: a state directory without quotes, backslashes or spaces, please (it goes into a TOML file)"
  mkdir -p "$state_dir"
  [[ -z "$(ls -A "$state_dir")" ]] || fail "$state_dir is not empty: give start a new or empty directory"
  # containerd.sock.ttrpc is the longest socket containerd makes here.
  local longest="$state_dir/run/containerd.sock.ttrpc"
  if ((${#longest} > 100)); then
    mktemp -d /run/pmcri.XXXXXX >"$state_dir/short-run-dir"
  fi
  resolve_paths "$state_dir"
  # containerd 1.6 puts the shims' sockets in /run/containerd/s whatever its state
  # directory; stop removes the directory if start made it.
  [[ -e /run/containerd ]] || touch "$state_dir/made-run-containerd"
  mkdir -p "$run" "$state_dir/cni/bin" "$state_dir/cni/net.d"
  write_config
  say "building the busybox image from /bin/busybox"
  build_image
  say "starting containerd (log: $log)"
  launch_containerd
  # The containerd API (ctr) comes up before the CRI plugin is serving.
  wait_for "answer from containerd (ctr version) on $socket" containerd_answers
  ctr_k8s images import "$state_dir/image/image.tar" >/dev/null \
    || launch_failed "ctr images import of $state_dir/image/image.tar failed"
  wait_for_cri "$py"
  echo "PROBEMARKER_TEST_CRI_ENDPOINT=unix://$socket"
  echo "PROBEMARKER_TEST_CRI_STATE=$state_dir"
}

cmd_down() {  # cmd_down STATE_DIR [--kill]
  require_root down
  resolve_paths "$(realpath -m "$1")"
  local pid signal=TERM how="stopped"
  [[ "${2:-}" != --kill ]] || { signal=KILL; how="killed"; }
  pid="$(containerd_pid)" || fail "containerd of $state_dir is not running"
  kill "-$signal" "$pid"
  for _ in $(seq 1 100); do
    alive "$pid" || break
    sleep 0.1
  done
  if alive "$pid"; then
    kill -KILL "$pid" 2>/dev/null || true
    how="killed after 10 s"
  fi
  rm -f "$pidfile"
  say "containerd $how (its shims keep running)"
}

cmd_up() {
  require_root up
  local py
  py="$(python_with_grpc)"
  resolve_paths "$(realpath -m "$1")"
  [[ -f "$config" ]] || fail "$state_dir has no containerd.toml: use start, not up"
  ! containerd_pid >/dev/null || fail "containerd of $state_dir is running already"
  launch_containerd
  wait_for_cri "$py"
}

# ---------------------------------------------------------------------------------------
# stop: leave nothing behind
# ---------------------------------------------------------------------------------------
shim_pids() {  # the shims of this containerd: their command line names its socket
  local pid
  # (comm is cut to 15 characters: containerd-shim-runc-v2 shows as containerd-shim)
  for pid in $(pgrep -x containerd-shim 2>/dev/null); do
    tr '\0' ' ' <"/proc/$pid/cmdline" 2>/dev/null | grep -qF -- "-address $socket " && echo "$pid"
  done | sort -u
}

cmd_stop() {
  require_root stop
  local target pid containers c
  target="$(realpath -m "$1")"
  [[ -d "$target" ]] || { say "$target does not exist: nothing to stop"; return; }
  # A start that failed before writing its configuration left at most an empty directory.
  if [[ -z "$(ls -A "$target")" ]]; then rmdir -- "$target"; say "removed the empty $target"; return; fi
  [[ -f "$target/containerd.toml" ]] || fail "$target has no containerd.toml: not a directory made by '$0 start'; not removing it"
  resolve_paths "$target"
  if containerd_pid >/dev/null && containerd_answers >/dev/null 2>&1; then
    # Through containerd: kill every task (sandboxes and containers), delete them.
    containers="$(ctr_k8s containers ls -q 2>/dev/null || true)"
    for c in $containers; do
      ctr_k8s tasks kill -s SIGKILL "$c" >/dev/null 2>&1 || true
    done
    for c in $containers; do
      ctr_k8s tasks delete -f "$c" >/dev/null 2>&1 || true
      ctr_k8s containers delete "$c" >/dev/null 2>&1 || true
    done
  fi
  if pid="$(containerd_pid)"; then
    kill -TERM "$pid" 2>/dev/null || true
    for _ in $(seq 1 50); do alive "$pid" || break; sleep 0.1; done
    kill -KILL "$pid" 2>/dev/null || true
  fi
  # Shims left (containerd was down, or a task would not die): kill them with their
  # containers (each shim is the parent of its container's processes).
  for pid in $(shim_pids); do
    pkill -KILL -P "$pid" 2>/dev/null || true
    kill -KILL "$pid" 2>/dev/null || true
  done
  # The shims' sockets (a shim killed above leaves its socket behind).
  local address
  for address in "$run"/state/io.containerd.runtime.v2.task/*/*/address; do
    [[ -f "$address" ]] || continue
    address="$(cat "$address")"
    if [[ "$address" == unix:///run/containerd/s/* ]]; then rm -f -- "${address#unix://}"; fi
  done
  if [[ -f "$target/made-run-containerd" ]]; then
    rmdir /run/containerd/s /run/containerd 2>/dev/null || true
  fi
  # Mounts under the state directories, deepest first (rootfs overlays, shm tmpfs).
  local dir
  for dir in "$target" "$run"; do
    awk -v d="$dir/" 'index($2, d) == 1 {print $2}' /proc/self/mounts | sort -r \
      | while read -r mp; do umount -l "$mp" 2>/dev/null || true; done
  done
  # The pods' cgroup (left empty by runc) in every hierarchy, and anything inside it
  # that is empty.
  find /sys/fs/cgroup -mindepth 1 -maxdepth 6 -type d -name "$POD_CGROUP" -print 2>/dev/null \
    | while read -r dir; do
        find "$dir" -depth -type d -exec rmdir {} + 2>/dev/null || true
      done
  if [[ "$run" != "$target/run" ]]; then rm -rf -- "$run"; fi
  rm -rf -- "$target"
  say "stopped; removed $target"
}

main() {
  (($# >= 1)) || usage
  local cmd="$1"
  shift
  case "$cmd" in
    install) (($# == 0)) || usage; cmd_install ;;
    start | stop | up)
      (($# == 1)) || usage
      "cmd_$cmd" "$1"
      ;;
    down)
      (($# == 1)) || { (($# == 2)) && [[ "$2" == --kill ]]; } || usage
      cmd_down "$@"
      ;;
    -h | --help | help) usage 0 ;;
    *) usage ;;
  esac
}

main "$@"
