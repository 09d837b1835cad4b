#!/bin/bash
# hack/prove-node-scope.sh: the node-scope admission policy (manifests/components/node-scope)
# on a real cluster, hack/cluster.sh's (Kubernetes 1.30+; recorded on 1.32 in docs/security.md).
#
#   hack/prove-node-scope.sh [ADMIN_KUBECONFIG]
#
# ADMIN_KUBECONFIG: an admin (system:masters) kubeconfig of the cluster hack/cluster.sh
# runs (default $PROBEMARKER_CLUSTER_DIR/kubeconfig, /tmp/probemarker-cluster/kubeconfig):
# bring it up first with your Kubernetes release's server binaries, take it down after:
#
#   PROBEMARKER_KUBE_BIN=/path/to/kubernetes/server/bin hack/cluster.sh up
#   hack/prove-node-scope.sh
#   hack/cluster.sh down
#
# Nothing is sent unless that kubeconfig's API server listens on an address of this host
# (tests/cluster/install.py, `reachable`; one line and exit 1 otherwise). PROBEMARKER:
# the command that runs probemarker (default `probemarker`; `python -m probemarker` from
# a checkout). The daemon under test runs here, on the host, not in the cluster.
#
# What it does, printing each command and the server's answer:
# 1. installs manifests/ with the component (kubectl apply -k of a temporary overlay
#    whose DaemonSet selects no node: the daemon of step 3 is the only one); checks the
#    policy's expressions against the Pod schema (the cluster's kube-controller-manager
#    fills a copy's status.typeChecking);
# 2. creates node-b (a Node object, no kubelet), a pod `web` on the cluster's node
#    probemarker-node, a pod `far` bound to node-b (it stays Pending), and a pod standing
#    for the daemon (ServiceAccount probemarker, probemarker-node); mints a token of that
#    ServiceAccount bound to that pod (so it carries probemarker-node), and one bound to
#    nothing;
# 3. runs `probemarker run --node probemarker-node` under the bound token with a marker
#    whose exec probe succeeds: the daemon writes its label, annotation, condition and
#    ownership record on `web` through the policy; then the marker is deleted and the
#    daemon removes all of it, through the policy too;
# 4. sends, with the same token, each write the policy must deny and checks the answer is
#    a 403 naming the reason; and a few writes it must allow.
# Exits non-zero on the first answer that is not the expected one. Leaves the policy
# installed (and the DaemonSet selecting no node) and removes the pods, the marker and
# node-b it made.
set -euo pipefail
REPO=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
ADMIN=$(realpath -m -- "${1:-${PROBEMARKER_CLUSTER_DIR:-/tmp/probemarker-cluster}/kubeconfig}")
read -r -a PROBEMARKER <<<"${PROBEMARKER:-probemarker}"
NODE=probemarker-node # hack/cluster.sh's node: a kubelet and containerd on this host
BUSYBOX=localhost/probemarker/busybox:cri-test # always in the node's containerd (hack/cri-runtime.sh)
NS=pm-proof
SYS=probemarker-system
STANDIN=probemarker-standin # the pod the daemon's token is bound to
WORK=$(mktemp -d "${TMPDIR:-/tmp}/prove-node-scope.XXXX")
DAEMON_PID=''
cleanup() {
  [[ -n $DAEMON_PID ]] && { kill "$DAEMON_PID" 2>/dev/null && wait "$DAEMON_PID" 2>/dev/null; }
  rm -rf "$WORK"
}
trap cleanup EXIT

K=(kubectl --kubeconfig "$ADMIN")
bound='' unbound=''
show() { # the command as run, with the tokens named rather than printed
  local line="$*"
  [[ -n $bound ]] && line=${line//"$bound"/\$BOUND}
  [[ -n $unbound ]] && line=${line//"$unbound"/\$UNBOUND}
  printf '\n$ %s\n' "$line" | sed "s#--kubeconfig $WORK/#--kubeconfig #g; s#$WORK/##g"
}
run() { show "$@"; "$@" 2>&1 | sed 's/^/  /'; }
fail() { echo "FAIL: $*" >&2; exit 1; }

# indent: stdin, each line two spaces in.
indent() {
  local line
  while IFS= read -r line; do printf '  %s\n' "$line"; done
}
# expect_denied WHAT MESSAGE CMD...: CMD must fail with the policy's MESSAGE (a substring).
expect_denied() {
  local what=$1 message=$2; shift 2
  show "$@"
  local out rc=0
  out=$("$@" 2>&1) || rc=$?
  indent <<<"$out"
  ((rc != 0)) || fail "$what: allowed, expected a denial"
  [[ $out == *"ValidatingAdmissionPolicy 'probemarker-node-scope'"* ]] || fail "$what: not denied by the policy"
  [[ $out == *"$message"* ]] || fail "$what: denied without '$message'"
  echo "  -> denied ($what)"
}
# expect_allowed WHAT CMD...: CMD must succeed.
expect_allowed() {
  local what=$1; shift
  show "$@"
  local out rc=0
  out=$("$@" 2>&1) || rc=$?
  indent <<<"$out"
  ((rc == 0)) || fail "$what: denied, expected it to be allowed"
  echo "  -> allowed ($what)"
}
# status_patch WHO NS POD JSONPATCH: the request the daemon makes (probemarker/kube/write/statuswrite.py),
# a JSON patch to pods/status. Not `kubectl patch --subresource=status`: kubectl GETs pods/status
# first, which the daemon's role does not grant. WHO: a token (the bearer), or `admin` for
# ADMIN_KUBECONFIG's own credentials. Prints the HTTP code and the Status message.
# A fifth argument is one more header (Impersonate-User: ...).
status_patch() {
  local who=$1 ns=$2 pod=$3 body=$4 out code auth
  if [[ $who == admin ]]; then auth=("${ADMIN_AUTH[@]}"); else auth=(-H "Authorization: Bearer $who"); fi
  out=$(curl -sS --cacert "$WORK/ca.crt" -X PATCH "${auth[@]}" ${5:+-H "$5"} \
    -H 'Content-Type: application/json-patch+json' -w '\n%{http_code}' \
    "$SERVER/api/v1/namespaces/$ns/pods/$pod/status" --data-binary "$body")
  code=${out##*$'\n'}
  python3 -c 'import json,sys; d=json.loads(sys.argv[1]); print(sys.argv[2], d.get("reason", "") if d.get("kind") == "Status" else "OK", d.get("message", ""))' "${out%$'\n'*}" "$code"
  ((code < 400))
}
# pod NS NAME SERVICEACCOUNT LABEL NODE: a busybox pod that sleeps, on NODE. Restricted-level
# fields: probemarker-system enforces the restricted Pod Security level. It tolerates every
# taint: node-b, which has no kubelet, gets the node lifecycle controller's unreachable
# NoExecute taint, and `far` must stay for the whole run.
pod() {
  gone "$1" "$2"
  "${K[@]}" create -f - >/dev/null <<P
apiVersion: v1
kind: Pod
metadata: {name: $2, namespace: $1, labels: {app: $4}, annotations: {example.com/team: shop}}
spec:
  nodeName: $5
  serviceAccountName: $3
  automountServiceAccountToken: false
  terminationGracePeriodSeconds: 1
  tolerations: [{operator: Exists}]
  securityContext: {runAsNonRoot: true, runAsUser: 65532, runAsGroup: 65532, seccompProfile: {type: RuntimeDefault}}
  containers:
  - name: main
    image: $BUSYBOX
    imagePullPolicy: Never
    command: [sleep, "2147483647"]
    securityContext: {allowPrivilegeEscalation: false, capabilities: {drop: [ALL]}}
P
}
# gone NS NAME: the pod is deleted and gone. Forced: `far`'s node has no kubelet to
# confirm a graceful deletion; on probemarker-node the kubelet stops the container after.
gone() {
  "${K[@]}" -n "$1" delete pod "$2" --ignore-not-found --force --grace-period=0 >/dev/null 2>&1 || true
}
# until_true SECONDS WHAT CMD...: CMD succeeds within SECONDS, or the run fails.
until_true() {
  local end=$((SECONDS + $1)) what=$2
  shift 2
  until "$@" >/dev/null 2>&1; do
    ((SECONDS < end)) || fail "$what"
    sleep 0.5
  done
}

# Before any request: the API server listens on an address of this host (a cluster
# that is down sends nothing off it; tests/cluster/install.py says why).
(cd "$REPO" && python3 -c 'import sys; from pathlib import Path; from tests.cluster.install import reachable; reachable(Path(sys.argv[1]))' "$ADMIN") ||
  exit 1

server_version=$("${K[@]}" version -o json | python3 -c 'import json,sys;print(json.load(sys.stdin)["serverVersion"]["gitVersion"])')
echo "== server: $server_version"
# The component's API, admissionregistration.k8s.io/v1 ValidatingAdmissionPolicy, is served from 1.30.
if ! [[ $server_version =~ ^v1\.([0-9]+)\. ]] || ((BASH_REMATCH[1] < 30)); then
  fail "the node-scope component needs Kubernetes 1.30 or later; this server is $server_version"
fi
"${K[@]}" get node "$NODE" >/dev/null 2>&1 || fail "no node $NODE: $ADMIN is not hack/cluster.sh's cluster"
run "${K[@]}" wait "node/$NODE" --for=condition=Ready --timeout=60s

echo "== 1. install manifests/ with the node-scope component"
# The DaemonSet selects no node: the daemon under test is the one step 3 runs on this
# host, and no other writes on `web`. Its image is named as hack/build-image.sh names it,
# so that even a pod of it would be pulled from nowhere but this host.
mkdir -p "$WORK/overlay"
rel=$(realpath --relative-to="$WORK/overlay" "$REPO/manifests")
version=$(sed -n 's/^__version__ = "\(.*\)"/\1/p' "$REPO/probemarker/__init__.py")
cat >"$WORK/overlay/kustomization.yaml" <<O
apiVersion: kustomize.config.k8s.io/v1beta1
kind: Kustomization
resources: [$rel]
components: [$rel/components/node-scope]
images: [{name: ghcr.io/probemarker/probemarker, newName: localhost/probemarker, newTag: "$version"}]
patches:
  - target: {kind: DaemonSet, name: probemarker}
    patch: |-
      apiVersion: apps/v1
      kind: DaemonSet
      metadata: {name: probemarker}
      spec: {template: {spec: {nodeSelector: {probemarker.io/prove-node-scope: no-node-has-this}}}}
O
run "${K[@]}" apply -k "$WORK/overlay"
run "${K[@]}" apply -k "$REPO/manifests" --dry-run=server
# A daemon pod of an earlier install (the cluster suite's) goes away.
no_daemon_pod() {
  [[ -z $("${K[@]}" -n $SYS get pods -l app.kubernetes.io/name=probemarker,app.kubernetes.io/component=daemon -o name) ]]
}
until_true 90 "a pod of the DaemonSet is still there" no_daemon_pod

echo "== 1b. type check against the Pod schema (kube-controller-manager's policy status)"
# kube-apiserver compiles the expressions with object and oldObject as dyn; the policy
# status controller of kube-controller-manager (the cluster runs all its controllers)
# type-checks them against the schema of the matched kind, but skips subresources
# (pods/status). So a copy matching `pods`, with each variable also as a validation of
# its own, is created without a binding (it applies to no request), checked, then deleted.
python3 - "$REPO/manifests/components/node-scope/validatingadmissionpolicy.yaml" >"$WORK/copy.yaml" <<'PY'
import sys, yaml
policy = yaml.safe_load(open(sys.argv[1]))
policy["metadata"] = {"name": "probemarker-node-scope-typecheck"}
policy["spec"]["matchConstraints"]["resourceRules"][0]["resources"] = ["pods"]
policy["spec"]["validations"] += [
    {"expression": f"[{v['expression']}] != []", "message": f"variable {v['name']}"}
    for v in policy["spec"]["variables"]
]
print(yaml.safe_dump(policy))
PY
"${K[@]}" delete validatingadmissionpolicy probemarker-node-scope-typecheck --ignore-not-found >/dev/null
"${K[@]}" create -f "$WORK/copy.yaml" >/dev/null
status=
for _ in $(seq 120); do
  status=$("${K[@]}" get validatingadmissionpolicy probemarker-node-scope-typecheck -o jsonpath='{.status.typeChecking}')
  [[ -n $status ]] && break
  sleep 0.5
done
show "${K[@]}" get validatingadmissionpolicy probemarker-node-scope-typecheck -o jsonpath='{.status.typeChecking}'
echo "  $status"
"${K[@]}" delete validatingadmissionpolicy probemarker-node-scope-typecheck >/dev/null
[[ -n $status ]] || status="no status within 60 s: does kube-controller-manager run?"
[[ $status == "{}" ]] || fail "type checking against the Pod schema: $status"

echo "== 2. nodes, pods, tokens"
# node-b: a Node object and no kubelet. A pod bound to it stays Pending, and its status
# is still written by whoever may (admin here): the policy's answer is about the node.
"${K[@]}" get node node-b >/dev/null 2>&1 || "${K[@]}" create -f - >/dev/null <<N
apiVersion: v1
kind: Node
metadata: {name: node-b}
N
"${K[@]}" create namespace $NS --dry-run=client -o yaml | "${K[@]}" apply -f - >/dev/null
# kube-controller-manager makes the namespace's ServiceAccount; pods are refused before
until_true 60 "no ServiceAccount $NS/default" "${K[@]}" -n $NS get serviceaccount default
pod $NS web default web "$NODE"
pod $NS far default web node-b
pod $SYS $STANDIN probemarker probemarker-standin "$NODE"
run "${K[@]}" wait --for=condition=Ready --timeout=120s -n $NS pod/web
run "${K[@]}" wait --for=condition=Ready --timeout=120s -n $SYS pod/$STANDIN
run "${K[@]}" get pods -A -o wide
uid=$("${K[@]}" -n $SYS get pod $STANDIN -o jsonpath='{.metadata.uid}')
# The command as the reader would type it, not expanded here.
# shellcheck disable=SC2016,SC2026
show 'BOUND=$('kubectl create token probemarker -n $SYS --bound-object-kind Pod --bound-object-name $STANDIN --bound-object-uid "$uid"')'
bound=$("${K[@]}" create token probemarker -n $SYS --bound-object-kind Pod --bound-object-name $STANDIN --bound-object-uid "$uid")
# shellcheck disable=SC2016,SC2026
show 'UNBOUND=$('kubectl create token probemarker -n $SYS')'
unbound=$("${K[@]}" create token probemarker -n $SYS)
for who in bound unbound; do
  "${K[@]}" config view --raw --minify --flatten >"$WORK/$who.kubeconfig"
  token=$bound; [[ $who == unbound ]] && token=$unbound
  kubectl --kubeconfig "$WORK/$who.kubeconfig" config set-credentials probemarker --token="$token" >/dev/null
  kubectl --kubeconfig "$WORK/$who.kubeconfig" config set-context --current --user=probemarker >/dev/null
done
SERVER=$("${K[@]}" config view --raw --minify -o jsonpath='{.clusters[0].cluster.server}')
"${K[@]}" config view --raw --minify -o jsonpath='{.clusters[0].cluster.certificate-authority-data}' | base64 -d >"$WORK/ca.crt"
# status_patch's `admin`: ADMIN_KUBECONFIG's user, a client certificate (hack/cluster.sh's) or a token.
admin_user() { "${K[@]}" config view --raw --minify --flatten -o jsonpath="{.users[0].user.$1}"; }
if [[ -n $(admin_user token) ]]; then
  ADMIN_AUTH=(-H "Authorization: Bearer $(admin_user token)")
else
  admin_user client-certificate-data | base64 -d >"$WORK/admin.crt"
  admin_user client-key-data | base64 -d >"$WORK/admin.key"
  ADMIN_AUTH=(--cert "$WORK/admin.crt" --key "$WORK/admin.key")
fi
D=(kubectl --kubeconfig "$WORK/bound.kubeconfig")
U=(kubectl --kubeconfig "$WORK/unbound.kubeconfig")
run "${D[@]}" auth whoami -o jsonpath='{.status.userInfo}{"\n"}'
run "${U[@]}" auth whoami -o jsonpath='{.status.userInfo}{"\n"}'

# A policy takes effect once the API server's policy informer has it: wait for the first denial.
for _ in $(seq 60); do
  out=$(status_patch "$unbound" $NS web '[{"op":"add","path":"/metadata/labels/x","value":"1"}]' 2>&1) && rc=0 || rc=$?
  [[ $out == *probemarker-node-scope* ]] && break
  ((rc != 0)) || "${K[@]}" -n $NS label pod web x- >/dev/null
  sleep 0.5
done

echo "== 3. the daemon, under the bound token, writes its results on its own node"
run "${K[@]}" apply -f - <<M
apiVersion: probemarker.io/v1alpha1
kind: PodProbeMarker
metadata: {name: proof, namespace: $NS}
spec:
  selector: {matchLabels: {app: web}}
  probes:
    - name: up
      containerName: main
      probe: {exec: {command: ["true"]}, periodSeconds: 2}
      markerPolicy:
        - state: Succeeded
          labels: {proof.example.com/up: "true"}
          annotations: {controller.kubernetes.io/pod-deletion-cost: "-5"}
      podConditionType: example.com/Up
M
show "${PROBEMARKER[@]}" run --kubeconfig "$WORK/bound.kubeconfig" --node "$NODE" --cleanup-delay-seconds 0 --log-format console
PROBEMARKER_METRICS_ADDRESS=0 "${PROBEMARKER[@]}" run --kubeconfig "$WORK/bound.kubeconfig" \
  --node "$NODE" --cleanup-delay-seconds 0 --log-format console >"$WORK/daemon.log" 2>&1 &
DAEMON_PID=$!
label() { "${K[@]}" -n $NS get pod web -o jsonpath='{.metadata.labels.proof\.example\.com/up}'; }
await() { # await WHAT CMD...: until CMD succeeds (60 s), while the daemon runs
  local what=$1; shift
  for _ in $(seq 120); do
    "$@" && return 0
    kill -0 $DAEMON_PID 2>/dev/null || { cat "$WORK/daemon.log"; fail "the daemon exited"; }
    sleep 0.5
  done
  cat "$WORK/daemon.log"; fail "$what"
}
show_web() {
  run "${K[@]}" -n $NS get pod web -o jsonpath='labels: {.metadata.labels}{"\n"}annotations: {.metadata.annotations}{"\n"}conditions: {range .status.conditions[*]}{.type}={.status} {end}{"\n"}'
}
# The conditions are single-quoted on purpose: `await` evaluates them again each turn.
# shellcheck disable=SC2016
await "the daemon did not write its label" eval '[[ $(label) == true ]]'
show_web
[[ $("${K[@]}" -n $NS get pod web -o jsonpath='{.status.conditions[?(@.type=="example.com/Up")].status}') == True ]] ||
  fail "the daemon did not write its condition"
[[ -n $("${K[@]}" -n $NS get pod web -o jsonpath='{.metadata.annotations.probemarker\.io/owned}') ]] ||
  fail "the daemon did not write its ownership record"
# The pod `far` matches the marker too, but it is on node-b: the daemon never sees it.
echo "-- the marker is deleted: the daemon removes what it wrote, through the policy too"
run "${K[@]}" -n $NS delete ppm proof
# shellcheck disable=SC2016
await "the daemon did not remove its label" eval '[[ -z $(label) ]]'
# shellcheck disable=SC2016
await "the daemon did not remove its record" eval \
  '[[ -z $("${K[@]}" -n $NS get pod web -o jsonpath="{.metadata.annotations.probemarker\.io/owned}") ]]'
show_web
kill -TERM $DAEMON_PID; wait $DAEMON_PID || true; DAEMON_PID=''
grep -E 'write\.|probe\.decided|denied|Forbidden' "$WORK/daemon.log" | sed 's/^/  daemon: /' || true
grep -qE 'write\.(retry|refused)' "$WORK/daemon.log" && fail "a write of the daemon was refused"

echo "== 4. the same token: what the policy denies"
expect_denied "a pod on another node" "probemarker may write only pods on its own node (token node: $NODE, pod node: node-b)" \
  status_patch "$bound" $NS far '[{"op":"add","path":"/metadata/labels/proof.example.com~1up","value":"true"}]'
expect_denied "status.phase" "not status.phase" \
  status_patch "$bound" $NS web '[{"op":"replace","path":"/status/phase","value":"Succeeded"}]'
expect_denied "status.podIP" "not status.podIP" \
  status_patch "$bound" $NS web '[{"op":"replace","path":"/status/podIP","value":"10.1.2.3"},{"op":"replace","path":"/status/podIPs","value":[{"ip":"10.1.2.3"}]}]'
expect_denied "metadata.finalizers" "not metadata.finalizers" \
  status_patch "$bound" $NS web '[{"op":"add","path":"/metadata/finalizers","value":["example.com/hold"]}]'
# The kubelet's Ready condition, wherever it is in the list (the test op makes sure).
ready=$("${K[@]}" -n $NS get pod web -o json |
  python3 -c 'import json,sys; print([c["type"] for c in json.load(sys.stdin)["status"]["conditions"]].index("Ready"))')
expect_denied "the Ready condition" "the condition Ready" \
  status_patch "$bound" $NS web "[{\"op\":\"test\",\"path\":\"/status/conditions/$ready/type\",\"value\":\"Ready\"},{\"op\":\"replace\",\"path\":\"/status/conditions/$ready/status\",\"value\":\"False\"}]"
expect_denied "a kubernetes.io/ label" "the label kubernetes.io/hostname" \
  status_patch "$bound" $NS web '[{"op":"add","path":"/metadata/labels/kubernetes.io~1hostname","value":"node-b"}]'
expect_denied "a k8s.io/ annotation" "the annotation k8s.io/owner" \
  status_patch "$bound" $NS web '[{"op":"add","path":"/metadata/annotations/k8s.io~1owner","value":"me"}]'
expect_denied "a kubernetes.io/ condition type" "the condition kubernetes.io/Idle" \
  status_patch "$bound" $NS web '[{"op":"add","path":"/status/conditions/-","value":{"type":"kubernetes.io/Idle","status":"True"}}]'
run "${K[@]}" -n $NS label pod web kubernetes.io/preexisting=yes --overwrite
expect_denied "removing a kubernetes.io/ label" "the label kubernetes.io/preexisting" \
  status_patch "$bound" $NS web '[{"op":"remove","path":"/metadata/labels/kubernetes.io~1preexisting"}]'
expect_denied "a token that names no node" "probemarker's token names no node" \
  status_patch "$unbound" $NS web '[{"op":"add","path":"/metadata/labels/proof.example.com~1up","value":"false"}]'

# Impersonation (by an admin) gives a user with no extra at all: `request.userInfo.extra`
# is then absent from the request, the case an unguarded access turns into an error.
expect_denied "a user with no extra at all (impersonated)" "probemarker's token names no node" \
  status_patch admin $NS web '[{"op":"add","path":"/metadata/labels/proof.example.com~1up","value":"false"}]' \
  "Impersonate-User: system:serviceaccount:$SYS:probemarker"

echo "== 5. what it allows: labels, annotations and conditions of its own node's pods"
expect_allowed "an app.kubernetes.io/ label and a controller.kubernetes.io/ annotation, next to an untouched kubernetes.io/ label" \
  status_patch "$bound" $NS web '[{"op":"add","path":"/metadata/labels/app.kubernetes.io~1part-of","value":"proof"},{"op":"add","path":"/metadata/annotations/controller.kubernetes.io~1pod-deletion-cost","value":"7"}]'
expect_allowed "a condition of its own type" \
  status_patch "$bound" $NS web '[{"op":"add","path":"/status/conditions/-","value":{"type":"example.com/Other","status":"True"}}]'
expect_allowed "a condition type under app.kubernetes.io/" \
  status_patch "$bound" $NS web '[{"op":"add","path":"/status/conditions/-","value":{"type":"app.kubernetes.io/Idle","status":"True"}}]'
expect_allowed "another user (admin) is not matched" \
  "${K[@]}" -n $NS patch pod far --subresource=status --type=json -p '[{"op":"add","path":"/metadata/labels/kubernetes.io~1other","value":"x"}]'

echo "== clean-up"
"${K[@]}" -n $NS delete ppm proof --ignore-not-found >/dev/null
gone $NS web
gone $NS far
gone $SYS $STANDIN
"${K[@]}" delete node node-b --ignore-not-found >/dev/null
echo "OK: every write was answered as expected"
