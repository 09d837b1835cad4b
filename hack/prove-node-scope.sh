#!/bin/bash
# hack/prove-node-scope.sh: the node-scope admission policy (manifests/components/node-scope)
# on a real kube-apiserver (1.30+; recorded on 1.32 in docs/security.md).
#
#   REALK8S=/tmp/realk8s-new hack/prove-node-scope.sh [ADMIN_KUBECONFIG]
#
# REALK8S: a control plane started by ../shared/realk8s/up.sh (its node-setup.sh is run
# here, for node-a and its fake kubelet); ADMIN_KUBECONFIG: an admin kubeconfig for it
# (default $REALK8S/kubeconfig). REALK8S_TOOLS: where up.sh and node-setup.sh are
# (default /work/shared/realk8s). PROBEMARKER: the command that runs probemarker
# (default `probemarker`).
#
# What it does, printing each command and the server's answer:
# 1. installs manifests/ with the component (kubectl apply -k of a temporary overlay);
# 2. creates node-b, a pod `web` on node-a, a pod `far` on node-b, and a pod standing for
#    the daemon (ServiceAccount probemarker, node-a); mints a token of that ServiceAccount
#    bound to that pod (so it carries node-a), and one bound to nothing;
# 3. runs `probemarker run --node node-a` under the bound token with a marker whose exec
#    probe succeeds: the daemon writes its label, annotation, condition and ownership
#    record on `web` through the policy; then the marker is deleted and the daemon
#    removes all of it, through the policy too;
# 4. sends, with the same token, each write the policy must deny and checks the answer is
#    a 403 naming the reason; and a few writes it must allow.
# Exits non-zero on the first answer that is not the expected one. Leaves the policy
# installed and removes the pods, the marker and its namespace's objects it made.
set -euo pipefail
REPO=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
R=${REALK8S:?set REALK8S to a control plane directory made by up.sh}
ADMIN=${1:-$R/kubeconfig}
TOOLS=${REALK8S_TOOLS:-/work/shared/realk8s}
read -r -a PROBEMARKER <<<"${PROBEMARKER:-probemarker}"
NS=pm-proof
SYS=probemarker-system
WORK=$(mktemp -d "${TMPDIR:-/tmp}/prove-node-scope.XXXX")
DAEMON_PID='' KCM_PID=''
cleanup() {
  for pid in $DAEMON_PID $KCM_PID; do kill "$pid" 2>/dev/null && wait "$pid" 2>/dev/null; done
  rm -rf "$WORK"
}
trap cleanup EXIT

K=(kubectl --kubeconfig "$ADMIN")
bound='' unbound=''
show() { # the command as run, with the tokens named rather than printed
  local line="$*"
  [[ -n $bound ]] && line=${line//"$bound"/\$BOUND}
  [[ -n $unbound ]] && line=${line//"$unbound"/\$UNBOUND}
  [[ -n ${admin_token:-} ]] && line=${line//"$admin_token"/\$ADMIN_TOKEN}
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
# status_patch TOKEN NS POD JSONPATCH: the request the daemon makes (probemarker/kube/write/statuswrite.py),
# a JSON patch to pods/status. Not `kubectl patch --subresource=status`: kubectl GETs pods/status
# first, which the daemon's role does not grant. Prints the HTTP code and the Status message.
# A fifth argument is one more header (Impersonate-User: ...).
status_patch() {
  local token=$1 ns=$2 pod=$3 body=$4 out code
  out=$(curl -sS --cacert "$WORK/ca.crt" -X PATCH -H "Authorization: Bearer $token" ${5:+-H "$5"} \
    -H 'Content-Type: application/json-patch+json' -w '\n%{http_code}' \
    "$SERVER/api/v1/namespaces/$ns/pods/$pod/status" --data-binary "$body")
  code=${out##*$'\n'}
  python3 -c 'import json,sys; d=json.loads(sys.argv[1]); print(sys.argv[2], d.get("reason", "") if d.get("kind") == "Status" else "OK", d.get("message", ""))' "${out%$'\n'*}" "$code"
  ((code < 400))
}
# bind NS POD NODE [IP]: what the scheduler and kubelet would do: bind, then a Running status.
bind() {
  local ns=$1 pod=$2 node=$3 ip=${4:-127.0.0.1} now
  "${K[@]}" create --raw "/api/v1/namespaces/$ns/pods/$pod/binding" -f - >/dev/null <<B
{"apiVersion":"v1","kind":"Binding","metadata":{"name":"$pod","namespace":"$ns"},"target":{"apiVersion":"v1","kind":"Node","name":"$node"}}
B
  now=$(date -u +%Y-%m-%dT%H:%M:%SZ)
  "${K[@]}" -n "$ns" patch pod "$pod" --subresource=status --type=merge -p "$(cat <<S
{"status":{"phase":"Running","podIP":"$ip","podIPs":[{"ip":"$ip"}],"startTime":"$now",
 "conditions":[{"type":"PodScheduled","status":"True"},{"type":"Initialized","status":"True"},
   {"type":"ContainersReady","status":"True"},{"type":"Ready","status":"True"}],
 "containerStatuses":[{"name":"main","image":"registry.invalid/none:1","imageID":"","ready":true,
   "started":true,"restartCount":0,"containerID":"containerd://$pod","state":{"running":{"startedAt":"$now"}}}]}}
S
)" >/dev/null
}
pod() { # pod NS NAME SERVICEACCOUNT LABEL
  # Restricted-level fields: probemarker-system enforces the restricted Pod Security level.
  "${K[@]}" -n "$1" delete pod "$2" --ignore-not-found --force --grace-period=0 >/dev/null 2>&1
  "${K[@]}" create -f - >/dev/null <<P
apiVersion: v1
kind: Pod
metadata: {name: $2, namespace: $1, labels: {app: $4}, annotations: {example.com/team: shop}}
spec:
  serviceAccountName: $3
  automountServiceAccountToken: false
  securityContext: {runAsNonRoot: true, runAsUser: 65532, seccompProfile: {type: RuntimeDefault}}
  containers:
  - name: main
    image: registry.invalid/none:1
    securityContext: {allowPrivilegeEscalation: false, capabilities: {drop: [ALL]}}
P
}

echo "== server: $("${K[@]}" version -o json | python3 -c 'import json,sys;print(json.load(sys.stdin)["serverVersion"]["gitVersion"])')"

echo "== 1. install manifests/ with the node-scope component"
mkdir -p "$WORK/overlay"
rel=$(realpath --relative-to="$WORK/overlay" "$REPO/manifests")
cat >"$WORK/overlay/kustomization.yaml" <<O
apiVersion: kustomize.config.k8s.io/v1beta1
kind: Kustomization
resources: [$rel]
components: [$rel/components/node-scope]
O
run "${K[@]}" apply -k "$WORK/overlay"
run "${K[@]}" apply -k "$REPO/manifests" --dry-run=server

echo "== 1b. type check against the Pod schema (kube-controller-manager's policy status)"
# kube-apiserver compiles the expressions with object and oldObject as dyn; the policy
# status controller of kube-controller-manager type-checks them against the schema of
# the matched kind, but skips subresources (pods/status). So a copy matching `pods`,
# with each variable also as a validation of its own, is checked, then deleted.
# Needs $REALK8S/bin/kube-controller-manager (built like kube-apiserver: go build
# ./cmd/kube-controller-manager); skipped without it.
if [[ -x $R/bin/kube-controller-manager ]]; then
  "$R/bin/kube-controller-manager" --kubeconfig "$ADMIN" --controllers=validatingadmissionpolicy-status-controller \
    --leader-elect=false --secure-port=0 >"$WORK/kcm.log" 2>&1 &
  KCM_PID=$!
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
  for _ in $(seq 60); do
    status=$("${K[@]}" get validatingadmissionpolicy probemarker-node-scope-typecheck -o jsonpath='{.status.typeChecking}')
    [[ -n $status ]] && break
    sleep 0.5
  done
  "${K[@]}" delete validatingadmissionpolicy probemarker-node-scope-typecheck >/dev/null
  kill $KCM_PID; wait $KCM_PID 2>/dev/null || true; KCM_PID=
  show "${K[@]}" get validatingadmissionpolicy probemarker-node-scope-typecheck -o jsonpath='{.status.typeChecking}'
  echo "  $status"
  [[ $status == "{}" ]] || fail "type checking against the Pod schema: ${status:-no answer}"
else
  echo "  skipped: no $R/bin/kube-controller-manager"
fi

echo "== 2. nodes, pods, tokens"
REALK8S=$R "$TOOLS/node-setup.sh"
"${K[@]}" get node node-b >/dev/null 2>&1 || "${K[@]}" create -f - >/dev/null <<N
apiVersion: v1
kind: Node
metadata: {name: node-b}
N
"${K[@]}" create namespace $NS --dry-run=client -o yaml | "${K[@]}" apply -f - >/dev/null
"${K[@]}" -n $NS create serviceaccount default --dry-run=client -o yaml | "${K[@]}" apply -f - >/dev/null
pod $NS web default web && bind $NS web node-a
pod $NS far default web && bind $NS far node-b
pod $SYS probemarker-node-a probemarker probemarker && bind $SYS probemarker-node-a node-a
run "${K[@]}" get pods -A -o wide
uid=$("${K[@]}" -n $SYS get pod probemarker-node-a -o jsonpath='{.metadata.uid}')
# The command as the reader would type it, not expanded here.
# shellcheck disable=SC2016,SC2026
show 'BOUND=$('kubectl create token probemarker -n $SYS --bound-object-kind Pod --bound-object-name probemarker-node-a --bound-object-uid "$uid"')'
bound=$("${K[@]}" create token probemarker -n $SYS --bound-object-kind Pod --bound-object-name probemarker-node-a --bound-object-uid "$uid")
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
show "${PROBEMARKER[@]}" run --kubeconfig "$WORK/bound.kubeconfig" --node node-a --cleanup-delay-seconds 0 --log-format console
PROBEMARKER_METRICS_ADDRESS=0 "${PROBEMARKER[@]}" run --kubeconfig "$WORK/bound.kubeconfig" \
  --node node-a --cleanup-delay-seconds 0 --log-format console >"$WORK/daemon.log" 2>&1 &
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
expect_denied "a pod on another node" "probemarker may write only pods on its own node (token node: node-a, pod node: node-b)" \
  status_patch "$bound" $NS far '[{"op":"add","path":"/metadata/labels/proof.example.com~1up","value":"true"}]'
expect_denied "status.phase" "not status.phase" \
  status_patch "$bound" $NS web '[{"op":"replace","path":"/status/phase","value":"Succeeded"}]'
expect_denied "status.podIP" "not status.podIP" \
  status_patch "$bound" $NS web '[{"op":"replace","path":"/status/podIP","value":"10.1.2.3"},{"op":"replace","path":"/status/podIPs","value":[{"ip":"10.1.2.3"}]}]'
expect_denied "metadata.finalizers" "not metadata.finalizers" \
  status_patch "$bound" $NS web '[{"op":"add","path":"/metadata/finalizers","value":["example.com/hold"]}]'
expect_denied "the Ready condition" "the condition Ready" \
  status_patch "$bound" $NS web '[{"op":"test","path":"/status/conditions/3/type","value":"Ready"},{"op":"replace","path":"/status/conditions/3/status","value":"False"}]'
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
admin_token=$("${K[@]}" config view --raw --minify -o jsonpath='{.users[0].user.token}')
expect_denied "a user with no extra at all (impersonated)" "probemarker's token names no node" \
  status_patch "$admin_token" $NS web '[{"op":"add","path":"/metadata/labels/proof.example.com~1up","value":"false"}]' \
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
for p in $NS/web $NS/far $SYS/probemarker-node-a; do
  "${K[@]}" -n "${p%/*}" delete pod "${p#*/}" --force --grace-period=0 --ignore-not-found >/dev/null 2>&1
done
echo "OK: every write was answered as expected"
