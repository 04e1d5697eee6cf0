#!/usr/bin/env bash
# Builds the real tools the e2e runs from their Go modules into .e2e/bin/ (make e2e-tools).
#
# One wrapper module per program under e2e/tools/<name>/ names what to build: `go install X@version` is
# refused for most of them because their go.mod files carry replace directives. Only the Go module proxy
# is used. A binary is rebuilt when its wrapper's go.mod, go.sum or this script changes (a stamp beside
# it), so a second run with the Go caches warm only checks stamps, and a fresh clone with warm caches
# only links. Nothing built here is committed.
#
#   e2e/build-tools.sh [name ...]   names: etcd kubernetes kwok pulumi pulumi-kubernetes aibrix kuberay rbg
#                                   scheduler-plugins quantity yamlread envoy-gateway kube-score gie (default: all)
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$(pwd)
BIN="${E2E_BIN:-$ROOT/.e2e/bin}"
TOOLS="$ROOT/e2e/tools"
mkdir -p "$BIN"
export CGO_ENABLED=0 GOFLAGS="${GOFLAGS:--buildvcs=false} -mod=mod"
# -pgo=off: kube-apiserver, controller-manager and scheduler ship default.pgo profiles; without it each
# compiles the shared packages again under its own profile.
GO_BUILD=(go build -trimpath -pgo=off)

log() { printf '[e2e-tools %s] %s\n' "$(date +%H:%M:%S)" "$*"; }

# The stamp: what the binaries of one wrapper were built from.
stamp_of() {
	# Depth 2: e2e/tools/gie keeps its own mains in subdirectories.
	find "$TOOLS/$1" -maxdepth 2 -type f \( -name 'go.*' -o -name '*.go' -o -name VERSION -o -name RELEASE -o -name OVERRIDES \) |
		sort | xargs cat "$ROOT/e2e/build-tools.sh" | sha256sum | cut -d' ' -f1
}

fresh() { # name binary...
	local name=$1 want; shift
	want=$(stamp_of "$name")
	for b in "$@"; do
		[[ -x "$BIN/$b" && "$(cat "$BIN/.$b.stamp" 2>/dev/null)" == "$want" ]] || return 1
	done
}

stamp() { # name binary...
	local name=$1 want; shift
	want=$(stamp_of "$name")
	for b in "$@"; do echo "$want" >"$BIN/.$b.stamp"; done
}

module_version() { (cd "$TOOLS/$1" && go list -m -f '{{.Version}}' "$2"); }
# `go list -m` leaves Dir empty until the module is downloaded, as it is on a new machine: download it.
module_dir() { (cd "$TOOLS/$1" && go mod download -json "$2" | python3 -c 'import json, sys; print(json.load(sys.stdin)["Dir"])'); }

build_etcd() {
	fresh etcd etcd && return
	(cd "$TOOLS/etcd" && "${GO_BUILD[@]}" -ldflags "-s -w" -o "$BIN/etcd" go.etcd.io/etcd/server/v3)
	stamp etcd etcd
}

build_kwok() {
	fresh kwok kwok && return
	local v
	v=$(module_version kwok sigs.k8s.io/kwok)
	(cd "$TOOLS/kwok" && "${GO_BUILD[@]}" -ldflags "-s -w -X sigs.k8s.io/kwok/pkg/consts.Version=$v" \
		-o "$BIN/kwok" sigs.k8s.io/kwok/cmd/kwok)
	stamp kwok kwok
}

build_kubernetes() {
	local cmds=(kube-apiserver kube-controller-manager kube-scheduler kubectl)
	fresh kubernetes "${cmds[@]}" && return
	local v major minor flags pkgs=()
	v=$(cat "$TOOLS/kubernetes/VERSION")
	major=${v#v}; major=${major%%.*}
	minor=${v#v*.}; minor=${minor%%.*}
	# `kubectl version` and the provider read /version: without these the binaries report v0.0.0.
	flags="-s -w"
	for p in k8s.io/component-base/version k8s.io/client-go/pkg/version; do
		flags="$flags -X $p.gitVersion=$v -X $p.gitMajor=$major -X $p.gitMinor=$minor -X $p.gitTreeState=clean"
	done
	for c in "${cmds[@]}"; do pkgs+=("k8s.io/kubernetes/cmd/$c"); done
	(cd "$TOOLS/kubernetes" && "${GO_BUILD[@]}" -ldflags "$flags" -o "$BIN/" "${pkgs[@]}")
	stamp kubernetes "${cmds[@]}"
}

build_pulumi() {
	fresh pulumi pulumi && return
	local v
	v=$(module_version pulumi github.com/pulumi/pulumi/pkg/v3)
	# Without the version ldflag `pulumi version` prints nothing and the Automation API refuses the CLI.
	(cd "$TOOLS/pulumi" && "${GO_BUILD[@]}" \
		-ldflags "-s -w -X github.com/pulumi/pulumi/sdk/v3/go/common/version.Version=$v" \
		-o "$BIN/pulumi" github.com/pulumi/pulumi/pkg/v3/cmd/pulumi)
	# No Python language host: its module (sdk/python/cmd/pulumi-language-python/v3) is not served here;
	# e2e/pulumi_client.py runs the program for the CLI and e2e/shims/run-policy-pack the policy pack.
	stamp pulumi pulumi
}

build_pulumi_kubernetes() {
	fresh pulumi-kubernetes pulumi-resource-kubernetes && return
	local dir src release
	dir="$TOOLS/pulumi-kubernetes"
	src="$(module_dir pulumi-kubernetes github.com/pulumi/pulumi-kubernetes/provider/v4)/cmd/pulumi-resource-kubernetes"
	release=$(cat "$dir/RELEASE")
	# What the module's generate.go does: the schema with its version set, both files re-serialised.
	python3 - "$src" "$dir" "${release#v}" <<-'EOF'
		import json, sys
		src, dst, version = sys.argv[1:]
		schema = json.load(open(f"{src}/schema.json"))
		schema["version"] = version
		json.dump(schema, open(f"{dst}/schema-embed.json", "w"), separators=(",", ":"))
		mapping = json.load(open(f"{src}/terraform-mapping.json"))
		json.dump(mapping, open(f"{dst}/terraform-mapping-embed.json", "w"), separators=(",", ":"))
	EOF
	(cd "$dir" && "${GO_BUILD[@]}" -ldflags "-s -w -X main.providerVersion=${release#v}" \
		-o "$BIN/pulumi-resource-kubernetes" .)
	stamp pulumi-kubernetes pulumi-resource-kubernetes
}

# The controllers (run as e2e/controllers.py says). Their go.mod files carry replace directives, which the
# wrappers copy (check_replaces).
build_aibrix() {
	fresh aibrix aibrix-controller-manager && return
	# Upstream's `make build-controller-manager`: no cgo, no ZMQ KV-event client (built only with -tags zmq).
	(cd "$TOOLS/aibrix" && "${GO_BUILD[@]}" -tags nozmq -ldflags "-s -w" \
		-o "$BIN/aibrix-controller-manager" github.com/vllm-project/aibrix/cmd/controllers)
	stamp aibrix aibrix-controller-manager
}

build_kuberay() {
	fresh kuberay kuberay-operator && return
	(cd "$TOOLS/kuberay" && "${GO_BUILD[@]}" -ldflags "-s -w" \
		-o "$BIN/kuberay-operator" github.com/ray-project/kuberay/ray-operator)
	stamp kuberay kuberay-operator
}

# e2e/coscheduling.py's second scheduler (gang scheduling, e2e/test_gang.py): scheduler-plugins' cmd/scheduler,
# kube-scheduler's app with the scheduler-plugins registered (Coscheduling among them), at the version AIBrix
# v0.7.0's go.mod requires (its controller creates that release's PodGroups). The wrapper carries upstream's
# replace lines but for OVERRIDES (check_replaces): k8s.io/kubernetes v1.31.8, not the release
# e2e/tools/kubernetes builds, so it shares few compiled packages with the control plane.
build_scheduler_plugins() {
	fresh scheduler-plugins kube-scheduler-plugins && return
	local v
	v=$(module_version scheduler-plugins sigs.k8s.io/scheduler-plugins)
	# Upstream's Makefile (build-scheduler, v0.31.8) sets the same: `--version` prints the plugins' release.
	(cd "$TOOLS/scheduler-plugins" && "${GO_BUILD[@]}" -ldflags "-s -w -X k8s.io/component-base/version.gitVersion=$v" \
		-o "$BIN/kube-scheduler-plugins" sigs.k8s.io/scheduler-plugins/cmd/scheduler)
	stamp scheduler-plugins kube-scheduler-plugins
}

# e2e/test_quantity.py's reference: k8s.io/apimachinery's ParseQuantity, at the version kube-apiserver is
# built with (check_kubernetes_pins), in a module of its own so that it compiles apimachinery only.
build_quantity() {
	fresh quantity quantity && return
	(cd "$TOOLS/quantity" && "${GO_BUILD[@]}" -ldflags "-s -w" -o "$BIN/quantity" .)
	stamp quantity quantity
}

# e2e/test_yamlread.py's reader: how kubectl reads a manifest file (k8s.io/apimachinery util/yaml over
# sigs.k8s.io/yaml and go.yaml.in/yaml/v2), at the versions kube-apiserver is built with (check_kubernetes_pins).
build_yamlread() {
	fresh yamlread yamlread && return
	(cd "$TOOLS/yamlread" && "${GO_BUILD[@]}" -ldflags "-s -w" -o "$BIN/yamlread" .)
	stamp yamlread yamlread
}

# e2e/test_gateway_xds.py's translator: egctl of the Envoy Gateway AIBrix v0.7.0 installs (v1.2.8), whose
# `x translate` runs EG's own Gateway API -> IR -> xDS translation, EnvoyPatchPolicies included, offline.
build_envoy_gateway() {
	fresh envoy-gateway egctl && return
	local v
	v=$(module_version envoy-gateway github.com/envoyproxy/gateway)
	# Upstream's tools/make/golang.mk sets the version the same way (`egctl version`).
	(cd "$TOOLS/envoy-gateway" && "${GO_BUILD[@]}" \
		-ldflags "-s -w -X github.com/envoyproxy/gateway/internal/cmd/version.envoyGatewayVersion=$v" \
		-o "$BIN/egctl" github.com/envoyproxy/gateway/cmd/egctl)
	stamp envoy-gateway egctl
}

# e2e/test_kube_score.py's scanner: kube-score v1.20.0 over every render (issue 30). Its go.mod has no replace
# directives; the wrapper pins it and its go.sum like the others. Upstream's .goreleaser.yml uses goreleaser's
# default ldflags, which set main.version (cmd/kube-score/cmd_version.go: "development" otherwise), without the "v".
build_kube_score() {
	fresh kube-score kube-score && return
	local v
	v=$(module_version kube-score github.com/zegl/kube-score)
	(cd "$TOOLS/kube-score" && "${GO_BUILD[@]}" -ldflags "-s -w -X main.version=${v#v}" \
		-o "$BIN/kube-score" github.com/zegl/kube-score/cmd/kube-score)
	stamp kube-score kube-score
}

# e2e/test_inference_pool.py's endpoint picker (issue 31): the Gateway API Inference Extension's full EPP, cmd/epp of
# sigs.k8s.io/gateway-api-inference-extension v1.5.0 (its last release with the scorers and the config loader;
# v1.6.x ships only the lightweight EPP), and two mains of ours in the wrapper: eppconfig (the EPP's own config
# loader, plugins registered as cmd/epp/runner registers them) and extproc-pick (an Envoy ext_proc client, at the
# go-control-plane version the module requires). The module's go.mod has no replace directives.
build_gie() {
	local bins=(epp eppconfig extproc-pick)
	fresh gie "${bins[@]}" && return
	local info v sha
	info=$(cd "$TOOLS/gie" && go mod download -json sigs.k8s.io/gateway-api-inference-extension)
	v=$(python3 -c 'import json, sys; print(json.load(sys.stdin)["Version"])' <<<"$info")
	# Upstream's Dockerfile sets version.CommitSHA and version.BuildRef (the tag, cloudbuild's _PULL_BASE_REF); the
	# proxy's .info names the tag's commit (Origin.Hash), which the EPP logs at startup and exports as a metric.
	sha=$(python3 -c 'import json, sys; info = json.load(open(json.load(sys.stdin)["Info"]))
print((info.get("Origin") or {}).get("Hash", ""))' <<<"$info")
	(cd "$TOOLS/gie" && "${GO_BUILD[@]}" -ldflags "-s -w \
		-X sigs.k8s.io/gateway-api-inference-extension/version.CommitSHA=$sha \
		-X sigs.k8s.io/gateway-api-inference-extension/version.BuildRef=$v" \
		-o "$BIN/" sigs.k8s.io/gateway-api-inference-extension/cmd/epp ./eppconfig ./extproc-pick)
	stamp gie "${bins[@]}"
}

check_gie_plugins() { # eppconfig registers exactly the plugins cmd/epp/runner's registerInTreePlugins does, in order
	local runner want have
	runner="$(module_dir gie sigs.k8s.io/gateway-api-inference-extension)/cmd/epp/runner/runner.go"
	want=$(sed -n '/^func (r \*Runner) registerInTreePlugins() {/,/^}/p' "$runner" | grep -o 'fwkplugin\.Register(.*')
	have=$(sed -n '/^func registerInTreePlugins() {/,/^}/p' "$TOOLS/gie/eppconfig/main.go" | grep -o 'fwkplugin\.Register(.*')
	if [[ -z "$want" || "$want" != "$have" ]]; then
		printf 'e2e/tools/gie/eppconfig/main.go: registerInTreePlugins differs from %s; want:\n%s\n' "$runner" "$want" >&2
		exit 2
	fi
}

check_kubernetes_pins() { # [name [module...]]: the wrapper's modules at the versions e2e/tools/kubernetes builds with
	local name=${1:-quantity} module want have
	shift || true
	for module in k8s.io/apimachinery "$@"; do
		want=$(module_version kubernetes "$module")
		have=$(module_version "$name" "$module")
		if [[ "$want" != "$have" ]]; then
			echo "e2e/tools/$name/go.mod: $module $have, but e2e/tools/kubernetes builds with $want" >&2
			exit 2
		fi
	done
}

build_rbg() {
	# The version the stacks deploy (platform.rbgVersion) is not served under either path, so there is no
	# wrapper: RoleBasedGroup kinds stay at the CRD level (schema, CEL, defaulting by the real API server).
	log "rbg: not built: the Go module proxy refuses sigs.k8s.io/rbgs@v0.7.0 and github.com/sgl-project/rbg@v0.7.0"
}

check_replaces() { # name module: the wrapper carries exactly the replace lines of the module's own go.mod, but
	# for those e2e/tools/<name>/OVERRIDES changes (`old=new@version` lines, each with its reason)
	local name=$1 module=$2 v upstream want have overrides=()
	local lines='import json, sys
over = dict(a.split("=", 1) for a in sys.argv[1:])
for r in json.load(sys.stdin).get("Replace") or []:
    old, new = (x["Path"] + ("@" + x["Version"] if x.get("Version") else "") for x in (r["Old"], r["New"]))
    print(old, over.get(old, new))'
	if [[ -f "$TOOLS/$name/OVERRIDES" ]]; then
		mapfile -t overrides < <(grep -v -e '^#' -e '^$' "$TOOLS/$name/OVERRIDES")
	fi
	v=$(module_version "$name" "$module")
	upstream=$(cd "$TOOLS/$name" && go mod download -json "$module@$v" |
		python3 -c 'import json, sys; print(json.load(sys.stdin)["GoMod"])')
	want=$(go mod edit -json "$upstream" | python3 -c "$lines" "${overrides[@]}" | sort)
	have=$(cd "$TOOLS/$name" && go mod edit -json | python3 -c "$lines" | sort)
	if [[ "$want" != "$have" ]]; then
		printf 'e2e/tools/%s/go.mod: replace lines differ from %s@%s'"'"'s go.mod (with OVERRIDES); want:\n%s\n' \
			"$name" "$module" "$v" "$want" >&2
		exit 2
	fi
}

check_kubernetes_replaces() {
	# The replace lines must be the ones generate-go-mod.sh derives from the release's go.mod.
	local v upstream want have
	v=$(cat "$TOOLS/kubernetes/VERSION")
	upstream=$(cd "$TOOLS/kubernetes" && go mod download -json "k8s.io/kubernetes@$v" |
		python3 -c 'import json, sys; print(json.load(sys.stdin)["GoMod"])')
	want=$(awk '$1 ~ /^k8s\.io\// && $2 == "v0.0.0" {print $1}' "$upstream" | sort -u)
	have=$(cd "$TOOLS/kubernetes" && go mod edit -json |
		python3 -c 'import json, sys; print("\n".join(sorted(r["Old"]["Path"] for r in json.load(sys.stdin).get("Replace") or [])))')
	if [[ "$want" != "$have" ]]; then
		echo "e2e/tools/kubernetes/go.mod: replace lines differ from k8s.io/kubernetes@$v's staging modules;" \
			"run e2e/tools/kubernetes/generate-go-mod.sh $v" >&2
		exit 2
	fi
}

ALL=(etcd kwok kubernetes pulumi pulumi-kubernetes aibrix kuberay rbg scheduler-plugins quantity yamlread envoy-gateway
	kube-score gie)
WANT=("$@")
[[ ${#WANT[@]} -gt 0 ]] || WANT=("${ALL[@]}")
command -v go >/dev/null || { echo "go not found: the e2e tools build with Go 1.26 from the Go module proxy" >&2; exit 2; }
start=$(date +%s)
i=0
for name in "${WANT[@]}"; do
	i=$((i + 1))
	case "$name" in
	etcd | kwok | kubernetes | pulumi | pulumi-kubernetes | aibrix | kuberay | rbg | scheduler-plugins | quantity | yamlread | \
		envoy-gateway | kube-score | gie) ;;
	*) echo "unknown tool '$name' (one of: ${ALL[*]})" >&2; exit 2 ;;
	esac
	t0=$(date +%s)
	log "($i/${#WANT[@]}) $name ..."
	[[ "$name" == kubernetes ]] && check_kubernetes_replaces
	[[ "$name" == aibrix ]] && check_replaces aibrix github.com/vllm-project/aibrix
	[[ "$name" == kuberay ]] && check_replaces kuberay github.com/ray-project/kuberay/ray-operator
	[[ "$name" == scheduler-plugins ]] && check_replaces scheduler-plugins sigs.k8s.io/scheduler-plugins
	[[ "$name" == quantity ]] && check_kubernetes_pins
	[[ "$name" == yamlread ]] && check_kubernetes_pins yamlread sigs.k8s.io/yaml go.yaml.in/yaml/v2
	[[ "$name" == envoy-gateway ]] && check_replaces envoy-gateway github.com/envoyproxy/gateway
	[[ "$name" == gie ]] && check_replaces gie sigs.k8s.io/gateway-api-inference-extension && check_gie_plugins
	"build_${name//-/_}"
	log "($i/${#WANT[@]}) $name done in $(($(date +%s) - t0)) s"
done
log "all done in $(($(date +%s) - start)) s; binaries in ${BIN#"$ROOT"/}"
