#!/usr/bin/env bash
# A real single-node Kubernetes on this machine, for the tests marked `cluster`
# (tests/cluster/) and for trying the add-on as users install it: etcd, kube-apiserver,
# kube-controller-manager, kube-scheduler, kube-proxy (iptables) and a kubelet that runs
# pods through containerd + runc (started by hack/cri-runtime.sh), pods on a CNI bridge
# this script makes. Root only; no systemd needed (cgroupfs).
#
#   binaries            checks PROBEMARKER_KUBE_BIN (below) as up does and prints the
#                       release, e.g. `Kubernetes v1.32.0`; needs neither root nor a cluster
#   up                  starts whatever is not running, waits until the node is Ready and
#                       the `default` ServiceAccount exists; the last line on stdout is
#                       KUBECONFIG=<admin kubeconfig> (system:masters)
#   load-image [IMAGE]  puts IMAGE from podman's storage (built by hack/build-image.sh;
#                       default localhost/probemarker:<package version>) into the node's
#                       containerd (`podman save --format oci-archive`, `ctr images import`);
#                       pods use it with imagePullPolicy IfNotPresent or Never
#   unload-image IMAGE  removes IMAGE from the node's containerd (what load-image put there)
#   status              processes, addresses, node and pods
#   down                deletes every pod (so CNI DEL runs), stops all that up started (by
#                       PID, only processes whose command line names the state dir) and
#                       undoes every host change: iptables chains, the bridge, network
#                       namespaces, mounts, cgroups, sysctls
#   restart-apiserver   stops the API server (SIGTERM, waits for its exit) and starts it
#                       again on the same etcd
#   restart-containerd  stops containerd (SIGTERM: it removes its socket; the containers
#                       keep running under their shims) and starts it again, as an
#                       upgrade of the runtime does
#
# Environment (defaults):
#   PROBEMARKER_KUBE_BIN     required: a folder with the five Kubernetes server binaries
#                            (kube-apiserver, kubelet, kube-controller-manager,
#                            kube-scheduler, kube-proxy) of one release, 1.28 or later: the
#                            `server/bin/` of an official release's
#                            kubernetes-server-linux-amd64 archive. Nothing is provided
#                            with the project; each binary's --version is checked
#   PROBEMARKER_CLUSTER_DIR  all state: binaries, pki, kubeconfigs, logs, etcd, containerd
#                            [/tmp/probemarker-cluster]
#   PROBEMARKER_CLUSTER_BRIDGE / _CIDR   the bridge this script makes and its subnet
#                            [pmk0, 10.246.0.0/24]; its first address is the API server's and
#                            the kubelet's only address: nothing listens on the host's NICs.
#                            up adds blackhole routes for 10.246.0.0/16 and the subnet that
#                            stay after down, so that an address of a cluster that is down
#                            fails on this host and is never routed off it
#   PROBEMARKER_CLUSTER_PORT_BASE   the API server's port; etcd uses +1..+3 and the node's
#                            components take 10300.. (kubelet 10300, its healthz 10301,
#                            controller-manager 10302, scheduler 10303, kube-proxy healthz
#                            10304 and metrics 10305) [6470]
#   PROBEMARKER_CRI_PYTHON   a Python with grpcio for hack/cri-runtime.sh [python3 if it has
#                            grpcio, else a venv in the state dir]
#   PROBEMARKER_CLUSTER_MUTATING_ADMISSION_POLICY   1: the API server serves
#                            MutatingAdmissionPolicy (manifests/components/readiness-gates*):
#                            on 1.32 and 1.33 the feature gate and the v1alpha1 API, on 1.34
#                            and 1.35 the gate and v1beta1, from 1.36 nothing to turn on;
#                            before 1.32 it does not exist. 0: left as the release has it [1]
#
# One such cluster per host: the kubelet's device-plugin socket is always
# /var/lib/kubelet/device-plugins/kubelet.sock, whatever its root dir. docs/development.md
# ("A real cluster") says what the cluster is for, its timings and how the tests use it.
set -euo pipefail

REPO=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
R=${PROBEMARKER_CLUSTER_DIR:-/tmp/probemarker-cluster}
BIN=${PROBEMARKER_KUBE_BIN:-}
BR=${PROBEMARKER_CLUSTER_BRIDGE:-pmk0}
CIDR=${PROBEMARKER_CLUSTER_CIDR:-10.246.0.0/24}
NODE_IP=$(awk -F'[./]' '{print $1"."$2"."$3"."$4+1}' <<<"$CIDR")
PLEN=${CIDR#*/}
HARNESS_RANGE=10.246.0.0/16 # blackholed by up, kept after down
SERVICE_CIDR=10.96.0.0/12 SERVICE_IP=10.96.0.1 # the `kubernetes` Service, in the serving cert
API_PORT=${PROBEMARKER_CLUSTER_PORT_BASE:-6470}
ETCD_PORT=$((API_PORT + 1))
KUBELET_PORT=10300 KUBELET_HEALTHZ_PORT=10301 KCM_PORT=10302 SCHED_PORT=10303
PROXY_HEALTHZ_PORT=10304 PROXY_METRICS_PORT=10305
NODE_NAME=probemarker-node
COMPONENTS=(kube-apiserver kubelet kube-controller-manager kube-scheduler kube-proxy)
P=$R/pki
# The kubelet (setupKernelTunables), kube-proxy and the bridge plugin change these: up
# records them once, down puts them back.
SYSCTLS=(net.ipv4.ip_forward net.ipv4.conf.all.route_localnet vm.overcommit_memory vm.panic_on_oom
  kernel.panic kernel.panic_on_oops kernel.keys.root_maxkeys kernel.keys.root_maxbytes)

say() { printf '==> %s\n' "$*" >&2; }
die() { printf 'cluster.sh: %s\n' "$*" >&2; exit 1; }
need_root() { [[ $(id -u) == 0 ]] || die "$1 needs root (it runs a kubelet and containerd, makes a bridge and iptables chains); run it as root or with sudo"; }
k() { kubectl --kubeconfig "$R/kubeconfig" "$@"; }

pid_of() { # NAME: the pid in $R/NAME.pid if that process still runs from $R (a recycled pid is not ours)
  local p
  p=$(cat "$R/$1.pid" 2>/dev/null) && [[ -n $p ]] && tr '\0' ' ' 2>/dev/null <"/proc/$p/cmdline" | grep -qF "$R/" &&
    echo "$p"
}
start() { # NAME CMD...: in a session of its own, so that the caller's exit or Ctrl-C does not reach it
  local n=$1 i
  shift
  if pid_of "$n" >/dev/null; then return; fi
  rm -f "$R/$n.pid"
  # the command writes its own pid: setsid forks when its caller leads a process group
  # shellcheck disable=SC2016
  setsid bash -c 'echo $$ >"$0"; exec "$@"' "$R/$n.pid" "$@" >>"$R/logs/$n.log" 2>&1 </dev/null &
  for i in $(seq 50); do [[ -s $R/$n.pid ]] && break; sleep 0.1; done
  say "$n started (pid $(cat "$R/$n.pid"), log $R/logs/$n.log)"
}
stop() { # NAME...: SIGTERM, SIGKILL after 10 s; returns once the process is gone
  local n p i
  for n in "$@"; do
    if p=$(pid_of "$n"); then
      kill "$p" 2>/dev/null || true
      for i in $(seq 100); do kill -0 "$p" 2>/dev/null || break; sleep 0.1; done
      if kill -0 "$p" 2>/dev/null; then kill -KILL "$p" 2>/dev/null || true; sleep 0.2; fi
      say "$n stopped (pid $p)"
    fi
    rm -f "$R/$n.pid"
  done
}
wait_until() { # SECONDS WHAT CMD...
  local t=$1 what=$2 end
  shift 2
  end=$((SECONDS + t))
  until "$@" >/dev/null 2>&1; do ((SECONDS < end)) || die "no $what within ${t}s (logs: $R/logs)"; sleep 0.3; done
}
port_open() { (exec 3<>"/dev/tcp/$1/$2") 2>/dev/null; }
sock() { # containerd's socket: cri-runtime.sh keeps its run dir under /run when $R is long
  local run=$R/cri/run
  [[ -f $R/cri/short-run-dir ]] && run=$(cat "$R/cri/short-run-dir")
  echo "$run/containerd.sock"
}
ctrk() { ctr --connect-timeout 5s -a "$(sock)" -n k8s.io "$@"; }
containerd_pid() {
  local p
  p=$(cat "$R/cri/containerd.pid" 2>/dev/null) && [[ $(cat "/proc/$p/comm" 2>/dev/null) == containerd ]] && echo "$p"
}

# ---------------------------------------------------------------------------------------
packages() {
  local p missing=()
  for p in containernetworking-plugins iptables conntrack etcd-server openssl xz-utils; do
    dpkg -s "$p" >/dev/null 2>&1 || missing+=("$p")
  done
  ((${#missing[@]} == 0)) && return
  say "apt-get install ${missing[*]}"
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null ||
    { apt-get update -qq >/dev/null &&
      DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null; }
}

binaries() { # checks BIN: the five binaries of one release, 1.28 or later
  local b version first="" minor
  [[ -n $BIN ]] || die "no Kubernetes binaries: set PROBEMARKER_KUBE_BIN to a folder with kube-apiserver, kubelet, kube-controller-manager, kube-scheduler and kube-proxy of one release >= 1.28 (an official release's server/bin/; docs/development.md)"
  for b in "${COMPONENTS[@]}"; do
    [[ -x $BIN/$b ]] || die "no executable $b in PROBEMARKER_KUBE_BIN=$BIN: it needs the five server binaries of one Kubernetes release >= 1.28 (server/bin/ of kubernetes-server-linux-amd64)"
  done
  for b in "${COMPONENTS[@]}"; do
    version=$("$BIN/$b" --version 2>/dev/null | head -n 1) || true
    [[ $version =~ ^Kubernetes\ v1\.([0-9]+)\.[0-9]+ ]] ||
      die "$BIN/$b --version printed '${version:0:80}', not 'Kubernetes v1.MINOR.PATCH': PROBEMARKER_KUBE_BIN needs an official release's server binaries"
    minor=${BASH_REMATCH[1]}
    ((minor >= 28)) || die "$BIN/$b is ${version#Kubernetes }: the cluster needs Kubernetes 1.28 or later (PROBEMARKER_KUBE_BIN)"
    [[ -z $first || $version == "$first" ]] ||
      die "PROBEMARKER_KUBE_BIN=$BIN mixes releases: kube-apiserver is ${first#Kubernetes }, $b is ${version#Kubernetes }"
    first=$version
  done
  echo "$first"
}

grpc_python() {
  local py
  for py in "${PROBEMARKER_CRI_PYTHON:-}" python3 "$R/venv/bin/python"; do
    [[ -n $py ]] && "$py" -c 'import grpc' 2>/dev/null && { echo "$py"; return; }
  done
  say "no Python with grpcio: making $R/venv"
  python3 -m venv "$R/venv" >&2 && "$R/venv/bin/pip" install -q grpcio >&2 && echo "$R/venv/bin/python"
}

host_state() { # what up changes on the host, recorded once so that down can undo it
  mkdir -p "$R/host"
  if [[ ! -f $R/host/sysctl ]]; then
    local s
    for s in "${SYSCTLS[@]}"; do echo "$s=$(sysctl -n "$s")"; done >"$R/host/sysctl"
  fi
  [[ -e /var/lib/kubelet || -f $R/host/var-lib-kubelet ]] || touch "$R/host/var-lib-kubelet"
}

blackhole() { # PREFIX: a route that drops what no more specific route takes, kept after down
  # The bridge's own route (a /24 inside the /16, or the subnet itself at a lower metric)
  # wins while the cluster is up; once down deletes the bridge, a client holding a stale
  # kubeconfig or pod address gets an error on this host instead of a route off it.
  ip route show type blackhole "$1" | grep -q . || ip route add blackhole "$1" metric 4000
}

network() {
  blackhole "$HARNESS_RANGE"
  blackhole "$CIDR"
  # The bridge exists before anything listens on it: the API server and the kubelet bind
  # to its address, and the CNI bridge plugin adopts it (same name, same gateway).
  ip link show "$BR" >/dev/null 2>&1 || { ip link add "$BR" type bridge && touch "$R/host/bridge"; }
  ip -4 -o addr show dev "$BR" | grep -q " $NODE_IP/$PLEN " || ip addr add "$NODE_IP/$PLEN" dev "$BR"
  ip link set "$BR" up
}

cri() {
  PROBEMARKER_CRI_PYTHON=$(grpc_python)
  export PROBEMARKER_CRI_PYTHON
  bash "$REPO/hack/cri-runtime.sh" install
  if containerd_pid >/dev/null; then
    :
  elif [[ -f $R/cri/containerd.toml ]] && pid_of etcd >/dev/null; then
    # containerd alone died: its containers still run under their shims
    bash "$REPO/hack/cri-runtime.sh" up "$R/cri"
  else
    # A new cluster (etcd starts empty): containers left from a cluster whose processes
    # were killed (a machine's session ending) belong to pods that no longer exist.
    [[ -f $R/cri/containerd.toml ]] && { bash "$REPO/hack/cri-runtime.sh" stop "$R/cri" || true; }
    rm -rf "$R/cri"
    bash "$REPO/hack/cri-runtime.sh" start "$R/cri" >/dev/null # stdout: env lines for the cri tests
  fi
  # cri-runtime.sh points the CRI plugin at these dirs; containerd reloads net.d on change.
  # No ipMasq: pods reach the node and the Service addresses it DNATs, nothing beyond.
  mkdir -p "$R/cri/cni/bin" "$R/cri/cni/net.d"
  ln -sf /usr/lib/cni/* "$R/cri/cni/bin/"
  cat >"$R/cri/cni/net.d/10-probemarker.conflist" <<EOF
{
  "cniVersion": "1.0.0",
  "name": "probemarker-cluster",
  "plugins": [
    {"type": "bridge", "bridge": "$BR", "isGateway": true, "ipMasq": false, "hairpinMode": true,
     "ipam": {"type": "host-local", "ranges": [[{"subnet": "$CIDR", "gateway": "$NODE_IP"}]],
              "routes": [{"dst": "0.0.0.0/0"}], "dataDir": "$R/cni-ipam"}}
  ]
}
EOF
}

cert() { # NAME SUBJECT EXTENSIONS: signed by the CA; made again when the extensions change
  local ext
  ext=$(printf 'basicConstraints=CA:FALSE\nkeyUsage=critical,digitalSignature,keyEncipherment\n%b' "$3")
  [[ -f $P/$1.crt && $(cat "$P/$1.ext" 2>/dev/null) == "$ext" ]] && return
  printf '%s\n' "$ext" >"$P/$1.ext"
  openssl req -newkey rsa:2048 -nodes -keyout "$P/$1.key" -out "$P/$1.csr" -subj "$2" 2>/dev/null
  openssl x509 -req -in "$P/$1.csr" -CA "$P/ca.crt" -CAkey "$P/ca.key" -CAcreateserial -out "$P/$1.crt" \
    -days 3650 -extfile "$P/$1.ext" 2>/dev/null
}
kubeconfig() { # FILE CERT
  cat >"$1" <<EOF
apiVersion: v1
kind: Config
clusters:
- name: probemarker
  cluster:
    server: https://$NODE_IP:$API_PORT
    certificate-authority-data: $(base64 -w0 <"$P/ca.crt")
users:
- name: $2
  user:
    client-certificate-data: $(base64 -w0 <"$P/$2.crt")
    client-key-data: $(base64 -w0 <"$P/$2.key")
contexts:
- name: probemarker
  context: {cluster: probemarker, user: $2}
current-context: probemarker
EOF
}
pki() {
  mkdir -p "$P"
  [[ -f $P/ca.crt ]] || openssl req -x509 -newkey rsa:2048 -nodes -keyout "$P/ca.key" -out "$P/ca.crt" \
    -days 3650 -subj "/CN=probemarker-cluster-ca" 2>/dev/null
  [[ -f $P/sa.key ]] || { openssl genrsa -out "$P/sa.key" 2048 2>/dev/null &&
    openssl rsa -in "$P/sa.key" -pubout -out "$P/sa.pub" 2>/dev/null; }
  local client='extendedKeyUsage=clientAuth\n'
  # pods reach the API server as 10.96.0.1 (the Service), the host as NODE_IP
  cert apiserver "/CN=kube-apiserver" "extendedKeyUsage=serverAuth\nsubjectAltName=IP:$NODE_IP,IP:$SERVICE_IP,DNS:kubernetes,DNS:kubernetes.default,DNS:kubernetes.default.svc,DNS:kubernetes.default.svc.cluster.local\n"
  # the API server dials the kubelet at the node's InternalIP and checks it against the CA
  cert kubelet-serving "/CN=$NODE_NAME" "extendedKeyUsage=serverAuth\nsubjectAltName=IP:$NODE_IP,DNS:$NODE_NAME\n"
  cert apiserver-kubelet-client "/O=system:masters/CN=kube-apiserver-kubelet-client" "$client"
  cert admin "/O=system:masters/CN=admin" "$client"
  cert kubelet "/O=system:nodes/CN=system:node:$NODE_NAME" "$client"
  cert controller-manager "/CN=system:kube-controller-manager" "$client"
  cert scheduler "/CN=system:kube-scheduler" "$client"
  cert kube-proxy "/O=system:node-proxier/CN=system:kube-proxy" "$client"
  kubeconfig "$R/kubeconfig" admin
  local c
  for c in kubelet controller-manager scheduler kube-proxy; do kubeconfig "$R/$c.kubeconfig" "$c"; done
}

audit_policy() { # every request by the daemon's ServiceAccounts (the tests count its writes) and
  # by OpenKruise's (bench/vs_kruise.py counts both systems' requests by verb)
  cat >"$R/audit-policy.yaml" <<EOF
apiVersion: audit.k8s.io/v1
kind: Policy
omitStages: [RequestReceived]
rules:
  - level: Metadata
    userGroups: ["system:serviceaccounts:probemarker-system", "system:serviceaccounts:kruise-system"]
  - level: None
EOF
}

mutating_admission_policy_args() { # the API server's flags that serve MutatingAdmissionPolicy
  [[ ${PROBEMARKER_CLUSTER_MUTATING_ADMISSION_POLICY:-1} == 1 ]] || return 0
  local version minor
  version=$("$BIN/kube-apiserver" --version) # "Kubernetes v1.32.0"
  [[ $version =~ v1\.([0-9]+)\. ]] || die "kube-apiserver --version: $version: no v1.MINOR"
  minor=${BASH_REMATCH[1]}
  local api=admissionregistration.k8s.io
  if ((minor == 32 || minor == 33)); then
    echo "--feature-gates=MutatingAdmissionPolicy=true --runtime-config=$api/v1alpha1=true"
  elif ((minor == 34 || minor == 35)); then
    echo "--feature-gates=MutatingAdmissionPolicy=true --runtime-config=$api/v1beta1=true"
  fi
}

apiserver() {
  audit_policy
  local flags extra
  flags=$(mutating_admission_policy_args)
  read -r -a extra <<<"$flags"
  # Bound to and advertised on NODE_IP only: the lease reconciler makes it the
  # `kubernetes` Service's endpoint, which kube-proxy DNATs 10.96.0.1:443 to.
  start apiserver "$BIN/kube-apiserver" --bind-address="$NODE_IP" --advertise-address="$NODE_IP" \
    --secure-port="$API_PORT" --endpoint-reconciler-type=lease --etcd-servers="http://127.0.0.1:$ETCD_PORT" \
    --tls-cert-file="$P/apiserver.crt" --tls-private-key-file="$P/apiserver.key" --client-ca-file="$P/ca.crt" \
    --service-account-issuer=https://kubernetes.default.svc.cluster.local --service-account-key-file="$P/sa.pub" \
    --service-account-signing-key-file="$P/sa.key" --service-cluster-ip-range="$SERVICE_CIDR" \
    --authorization-mode=Node,RBAC --enable-admission-plugins=NodeRestriction --allow-privileged=true \
    --kubelet-client-certificate="$P/apiserver-kubelet-client.crt" --kubelet-client-key="$P/apiserver-kubelet-client.key" \
    --kubelet-certificate-authority="$P/ca.crt" --kubelet-preferred-address-types=InternalIP \
    --cert-dir="$R/apiserver-certs" --audit-policy-file="$R/audit-policy.yaml" --audit-log-path="$R/logs/audit.log" \
    --audit-log-maxsize=200 --audit-log-maxbackup=1 "${extra[@]}"
  wait_until 90 "ready API server on $NODE_IP:$API_PORT" k get --raw /readyz
}

controlplane() {
  if ! pid_of etcd >/dev/null; then
    rm -rf "$R/etcd-data" # a new etcd starts empty: no stale node or pods from last time
    local e=http://127.0.0.1
    start etcd etcd --name probemarker --data-dir "$R/etcd-data" \
      --listen-client-urls "$e:$ETCD_PORT" --advertise-client-urls "$e:$ETCD_PORT" \
      --listen-peer-urls "$e:$((ETCD_PORT + 1))" --initial-advertise-peer-urls "$e:$((ETCD_PORT + 1))" \
      --initial-cluster "probemarker=$e:$((ETCD_PORT + 1))" --listen-metrics-urls "$e:$((ETCD_PORT + 2))"
    wait_until 30 "etcd on 127.0.0.1:$ETCD_PORT" port_open 127.0.0.1 "$ETCD_PORT"
  fi
  apiserver
  # each controller acts as its own ServiceAccount, as in kubeadm clusters
  start kcm "$BIN/kube-controller-manager" --kubeconfig="$R/controller-manager.kubeconfig" \
    --authentication-kubeconfig="$R/controller-manager.kubeconfig" --authorization-kubeconfig="$R/controller-manager.kubeconfig" \
    --bind-address=127.0.0.1 --secure-port="$KCM_PORT" --leader-elect=false --controllers='*' \
    --service-account-private-key-file="$P/sa.key" --root-ca-file="$P/ca.crt" --use-service-account-credentials=true \
    --cluster-signing-cert-file="$P/ca.crt" --cluster-signing-key-file="$P/ca.key" --v=1
  start sched "$BIN/kube-scheduler" --kubeconfig="$R/scheduler.kubeconfig" \
    --authentication-kubeconfig="$R/scheduler.kubeconfig" --authorization-kubeconfig="$R/scheduler.kubeconfig" \
    --bind-address=127.0.0.1 --secure-port="$SCHED_PORT" --leader-elect=false --v=1
}

node() {
  mkdir -p "$R/kubelet/root" "$R/kubelet/manifests"
  cat >"$R/kubelet/config.yaml" <<EOF
apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
# cgroupfs without systemd; no QoS cgroups or allocatable enforcement (a VM without
# CAP_SYS_RESOURCE); no swap check; no cluster DNS; serves on the bridge address only.
address: $NODE_IP
port: $KUBELET_PORT
readOnlyPort: 0
healthzBindAddress: 127.0.0.1
healthzPort: $KUBELET_HEALTHZ_PORT
authentication:
  anonymous: {enabled: false}
  webhook: {enabled: true}
  x509: {clientCAFile: $P/ca.crt}
authorization:
  mode: Webhook
tlsCertFile: $P/kubelet-serving.crt
tlsPrivateKeyFile: $P/kubelet-serving.key
containerRuntimeEndpoint: unix://$(sock)
cgroupDriver: cgroupfs
cgroupsPerQOS: false
enforceNodeAllocatable: []
failSwapOn: false
staticPodPath: $R/kubelet/manifests
clusterDomain: cluster.local
resolvConf: /etc/resolv.conf
evictionHard: {}
imageGCHighThresholdPercent: 100
imageGCLowThresholdPercent: 99
serializeImagePulls: false
podLogsDir: $R/kubelet/pod-logs
EOF
  start kubelet "$BIN/kubelet" --config="$R/kubelet/config.yaml" --kubeconfig="$R/kubelet.kubeconfig" \
    --root-dir="$R/kubelet/root" --hostname-override="$NODE_NAME" --node-ip="$NODE_IP" --v=2
  wait_until 60 "node $NODE_NAME registered" k get node "$NODE_NAME"
  # NodePorts on NODE_IP only (so no route_localnet); conntrack sysctls left as they are
  start proxy "$BIN/kube-proxy" --kubeconfig="$R/kube-proxy.kubeconfig" --hostname-override="$NODE_NAME" \
    --proxy-mode=iptables --cluster-cidr="$CIDR" --nodeport-addresses="$NODE_IP/32" \
    --healthz-bind-address="127.0.0.1:$PROXY_HEALTHZ_PORT" --metrics-bind-address="127.0.0.1:$PROXY_METRICS_PORT" \
    --conntrack-max-per-core=0 --conntrack-tcp-timeout-established=0 --conntrack-tcp-timeout-close-wait=0 --v=2
  k wait "node/$NODE_NAME" --for=condition=Ready --timeout=90s >&2
  # pods are refused until the controller-manager has made the namespace's ServiceAccount
  wait_until 60 "ServiceAccount default/default" k -n default get serviceaccount default
}

other_kubelet() { # a kubelet not ours holds the one device-plugin socket of this host
  local p
  for p in $(pgrep -x kubelet 2>/dev/null); do
    tr '\0' ' ' <"/proc/$p/cmdline" 2>/dev/null | grep -qF "$R/" || { echo "$p"; return 0; }
  done
  return 1
}

# ---------------------------------------------------------------------------------------
up() {
  need_root up
  command -v kubectl >/dev/null || die "kubectl is not on PATH"
  binaries >/dev/null
  if [[ -d $R && -n $(ls -A "$R") && ! -f $R/.cluster.sh ]]; then
    die "$R is not empty and was not made by this script: set PROBEMARKER_CLUSTER_DIR to a new folder"
  fi
  local other
  if other=$(other_kubelet); then
    die "another kubelet runs on this host (pid $other): one per host (its device-plugin socket is fixed); stop it first"
  fi
  mkdir -p "$R/logs" && touch "$R/.cluster.sh"
  packages
  printf '%s\n' "$BIN" >"$R/kube-bin"
  host_state
  network
  cri
  pki
  controlplane
  node
  echo "KUBECONFIG=$R/kubeconfig"
}

restart_apiserver() {
  need_root restart-apiserver
  binaries >/dev/null
  stop apiserver
  apiserver
}

restart_containerd() {
  need_root restart-containerd
  [[ -f $R/cri/containerd.toml ]] || die "no containerd in $R: run \`$0 up\` first"
  PROBEMARKER_CRI_PYTHON=$(grpc_python)
  export PROBEMARKER_CRI_PYTHON
  bash "$REPO/hack/cri-runtime.sh" down "$R/cri"
  bash "$REPO/hack/cri-runtime.sh" up "$R/cri"
}

load_image() {
  need_root load-image
  local image=${1:-} archive
  if [[ -z $image ]]; then
    image="localhost/probemarker:$(sed -n 's/^__version__ = "\(.*\)"/\1/p' "$REPO/probemarker/__init__.py")"
  fi
  containerd_pid >/dev/null || die "the cluster's containerd is not running: run \`$0 up\` first"
  command -v podman >/dev/null || die "podman is not installed (apt-get install podman): it holds the image hack/build-image.sh built"
  podman image exists "$image" || die "podman has no image $image: build it with hack/build-image.sh"
  archive=$(mktemp "$R/image.XXXXXX.tar")
  # EXIT, not RETURN: die() exits, and the archive (the whole image) must not stay
  # shellcheck disable=SC2064
  trap "rm -f '$archive'" EXIT
  rm -f "$archive"
  podman save --quiet --format oci-archive -o "$archive" "$image"
  ctrk images import "$archive" >&2
  local listed
  listed=$(ctrk images ls -q) # captured first: grep -q would end the pipe early (pipefail)
  grep -qxF "$image" <<<"$listed" || die "containerd does not list $image after the import"
  say "$image is in the node's containerd"
}

unload_image() {
  need_root unload-image
  local image=${1:-}
  [[ -n $image ]] || die "unload-image: which image? (\`$0 unload-image IMAGE\`)"
  containerd_pid >/dev/null || die "the cluster's containerd is not running: run \`$0 up\` first"
  ctrk images rm "$image" >&2 || true # absent already is fine: nothing of it is left
  local listed
  listed=$(ctrk images ls -q)
  ! grep -qxF "$image" <<<"$listed" || die "containerd still lists $image"
  say "$image is not in the node's containerd"
}

status() {
  local n p
  for n in etcd apiserver kcm sched kubelet proxy; do
    if p=$(pid_of "$n"); then echo "$n: running (pid $p)"; else echo "$n: stopped"; fi
  done
  if p=$(containerd_pid); then echo "containerd: running (pid $p, $(sock))"; else echo "containerd: stopped"; fi
  ip -br addr show dev "$BR" 2>/dev/null || echo "bridge $BR: absent"
  if k get --raw /readyz >/dev/null 2>&1; then
    k get nodes -o wide
    k get pods -A -o wide
  fi
}

down() {
  need_root down
  [[ -f $R/.cluster.sh ]] || { say "no cluster in $R: nothing to do"; return; }
  # The kubeconfigs name the bridge's address, which is gone after down: none stays to
  # be read by a client later, however down ends (the blackhole routes stay too).
  trap 'rm -f "$R"/kubeconfig "$R"/*.kubeconfig' EXIT
  local ns=() i
  # The kubelet tears pods down (CNI DEL, unmounts) only while it and the API server
  # run; without the controllers nothing recreates them.
  stop kcm sched
  if pid_of kubelet >/dev/null && k get --raw /readyz >/dev/null 2>&1; then
    rm -f "$R"/kubelet/manifests/*
    k delete pods -A --all --grace-period=1 --wait=false >/dev/null 2>&1 || true
    for i in $(seq 60); do
      [[ -z $(k get pods -A --field-selector "spec.nodeName=$NODE_NAME" -o name 2>/dev/null) ]] && break
      sleep 1
    done
  fi
  # the sandboxes' network namespaces, in case a pod outlived the kubelet
  if [[ -S $(sock) ]]; then
    mapfile -t ns < <(for i in $(ctrk containers ls -q 2>/dev/null); do ctrk containers info "$i" 2>/dev/null; done |
      grep -o '/var/run/netns/cni-[0-9a-f-]*' | sort -u)
  fi
  stop kubelet proxy
  # kube-proxy of the release up ran (PROBEMARKER_KUBE_BIN then, recorded in $R/kube-bin)
  local proxy
  proxy=${BIN:-$(cat "$R/kube-bin" 2>/dev/null || true)}/kube-proxy
  [[ -x $proxy ]] && { "$proxy" --cleanup >/dev/null 2>&1 || true; }
  [[ -f $R/cri/containerd.toml ]] && { bash "$REPO/hack/cri-runtime.sh" stop "$R/cri" || true; }
  for i in "${ns[@]}"; do [[ -e $i ]] && { umount "$i" 2>/dev/null || true; rm -f "$i"; }; done
  stop apiserver etcd
  awk -v d="$R/" 'index($2, d) == 1 {print $2}' /proc/self/mounts | sort -r | while read -r i; do umount -l "$i"; done
  # kube-proxy --cleanup leaves the kubelet's chains (KUBE-FIREWALL, canaries); no other
  # kubelet or kube-proxy runs on this host (up refuses to start beside one)
  local ipt t c
  for ipt in iptables ip6tables; do
    for t in filter nat mangle; do
      "$ipt" -t "$t" -S 2>/dev/null | awk '$1 == "-A" && $2 !~ /^KUBE-/ && / -j KUBE-/' | sed 's/^-A/-D/' |
        while read -r i; do eval "$ipt -t $t $i" || true; done
      for c in $("$ipt" -t "$t" -S 2>/dev/null | awk '$1 == "-N" && $2 ~ /^KUBE-/ {print $2}'); do "$ipt" -t "$t" -F "$c"; done
      for c in $("$ipt" -t "$t" -S 2>/dev/null | awk '$1 == "-N" && $2 ~ /^KUBE-/ {print $2}'); do "$ipt" -t "$t" -X "$c"; done
    done
  done
  rm -rf "$R/cni-ipam"
  [[ -f $R/host/bridge ]] && { ip link del "$BR" 2>/dev/null || true; rm -f "$R/host/bridge"; }
  # runc leaves containerd's default cgroup parent (k8s.io) in every hierarchy; only empty ones go
  find /sys/fs/cgroup -depth -mindepth 1 -maxdepth 3 -type d -name k8s.io -exec rmdir {} + 2>/dev/null || true
  if [[ -f $R/host/var-lib-kubelet ]]; then
    rm -f /var/lib/kubelet/device-plugins/kubelet.sock
    rmdir /var/lib/kubelet/device-plugins /var/lib/kubelet 2>/dev/null || true
    rm -f "$R/host/var-lib-kubelet"
  fi
  if [[ -f $R/host/sysctl ]]; then
    local saved
    mapfile -t saved <"$R/host/sysctl"
    sysctl -q -w "${saved[@]}" >/dev/null
    rm -f "$R/host/sysctl"
  fi
  # a clean slate for the next up (pki, kubeconfigs, binaries and logs stay)
  grep -qF " $R/" /proc/self/mounts || rm -rf "$R/kubelet/root" "$R/etcd-data" "$R/cri"
  say "down: nothing of $R runs"
}

usage() {
  sed -n '2,/^set -euo/{/^set -euo/d;s/^# \{0,1\}//;p}' "${BASH_SOURCE[0]}" >&2
  exit "${1:-2}"
}

case ${1:-} in
  binaries) binaries ;;
  up) up ;;
  load-image) load_image "${2:-}" ;;
  unload-image) unload_image "${2:-}" ;;
  status) status ;;
  down) down ;;
  restart-apiserver) restart_apiserver ;;
  restart-containerd) restart_containerd ;;
  -h | --help) usage 0 ;;
  *) usage 2 ;;
esac
