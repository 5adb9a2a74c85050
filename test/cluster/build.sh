#!/usr/bin/env bash
# Builds every program the test control plane runs, from the Go module proxy, once per version, into
# $MDPLANE_CACHE/bin (default ~/.cache/mdplane/bin). A binary that is already there is reused, so a
# second run costs seconds. With Go's build cache empty, the first takes over 40 minutes on two
# cores, Kubernetes the most; with it warm, only the links are left.
# Usage: build.sh [component...]   (components: node-packages etcd kubernetes kueue kwok crossplane
# crossplane-cli function-patch-and-transform coredns inference-sim containerd runc cni-plugins;
# default all: the e2e suite runs the CLI and the team API example's Function, the render recipe's
# test the CLI, the real node the rest)
# Programs that go into the real node's images (Crossplane, CoreDNS, the engine stand-in, the team API
# example's Function) are built static (CGO_ENABLED=0): the images have no C library.
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
cache=${MDPLANE_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/mdplane}
bin=$cache/bin
mkdir -p "$bin"

K8S=v1.35.3
# The one switch to another Kubernetes (docs/testing.md, "Another Kubernetes"): MDPLANE_KUBERNETES.
K8S=${MDPLANE_KUBERNETES:-$K8S}
ETCD=v3.6.5
KUEUE=v0.17.0
KWOK=v0.8.0
CROSSPLANE=v2.4.0
CROSSPLANE_CLI=v2.5.0 # the CLI's own module and releases since Crossplane v2.4
PATCH_AND_TRANSFORM=v0.5.0 # the newest release the module proxy serves
COREDNS=v1.14.1
INFERENCE_SIM=v0.10.2 # llm-d-inference-sim, the engine stand-in
CONTAINERD=v2.2.9     # the newest minor Kubernetes v1.35 lists
RUNC=v1.5.3
CNI_PLUGINS=v1.10.0

# build NAME VERSION MODULE_DIR PACKAGE [LDFLAGS [VERSION_FLAG]]: go build PACKAGE in MODULE_DIR to
# $bin/NAME-VERSION (or to $bin/NAME when NAME names a directory: cni-plugins-v1.10.0/bridge). With
# VERSION_FLAG, a cached binary is reused only if `NAME VERSION_FLAG` prints VERSION, and rebuilt
# otherwise. CGO_ENABLED and BUILD_TAGS in the environment apply.
build() {
  local name=$1 version=$2 dir=$3 pkg=$4 ldflags=${5:-} version_flag=${6:-}
  local out=$bin/$name-$version
  if [[ $name == */* ]]; then out=$bin/$name; mkdir -p "$(dirname "$out")"; fi
  if [ -x "$out" ] && { [ -z "$version_flag" ] || [ "$("$out" "$version_flag" 2>/dev/null)" = "$version" ]; }; then
    echo "reuse $out"
    return
  fi
  local start=$SECONDS
  echo "build $name $version ..."
  # A private temporary name: two builds racing for the same binary (two test packages on a cold
  # machine) each finish theirs, and the rename is atomic.
  local tmp="$out.tmp.$$"
  (cd "$dir" && go build -trimpath -tags="${BUILD_TAGS:-}" -ldflags="-s -w $ldflags" -o "$tmp" "$pkg")
  mv "$tmp" "$out"
  echo "built $out in $((SECONDS - start)) s"
}

k8s_minor=${K8S#v1.}
k8s_minor=${k8s_minor%%.*}
k8s_ldflags="-X k8s.io/component-base/version.gitVersion=$K8S -X k8s.io/component-base/version.gitMajor=1 -X k8s.io/component-base/version.gitMinor=$k8s_minor"

# kubernetes_module prints the directory of a wrapper module that builds Kubernetes $K8S: the
# committed one for its pinned version, else a copy in the cache whose k8s.io/kubernetes and staging
# replace directives name $K8S (the staging modules are the ones that version's go.mod replaces).
kubernetes_module() {
  local pinned
  pinned=$(sed -n 's/^require k8s.io\/kubernetes //p' "$here/tools/kubernetes/go.mod")
  if [ "$pinned" = "$K8S" ]; then
    echo "$here/tools/kubernetes"
    return
  fi
  local dir=$cache/src/kubernetes-$K8S
  if [ ! -f "$dir/go.sum" ]; then
    rm -rf "$dir" && mkdir -p "$dir"
    cp "$here/tools/kubernetes/tools.go" "$dir/"
    local gomod staging=v0.${K8S#v1.}
    gomod=$(cd "$here/tools/kubernetes" && go mod download -json "k8s.io/kubernetes@$K8S" | sed -n 's/^[[:space:]]*"GoMod": "\(.*\)",$/\1/p')
    {
      echo "module github.com/mdplane/mdplane/test/cluster/tools/kubernetes"
      echo
      echo "go $(sed -n 's/^go //p' "$gomod")"
      echo
      echo "require k8s.io/kubernetes $K8S"
      echo
      echo "replace ("
      sed -n 's#^[[:space:]]*\(k8s.io/[a-z0-9-]*\) => ./staging/src/.*#\t\1 => \1 '"$staging"'#p' "$gomod"
      echo ")"
    } > "$dir/go.mod"
    (cd "$dir" && go mod tidy) >&2
  fi
  echo "$dir"
}

components=("$@")
[ ${#components[@]} -gt 0 ] || components=(node-packages etcd kubernetes kueue kwok crossplane crossplane-cli function-patch-and-transform coredns inference-sim containerd runc cni-plugins)
for c in "${components[@]}"; do
  case $c in
    node-packages) "$here/node-packages.sh" ;;
    etcd) build etcd $ETCD "$here/tools/etcd" go.etcd.io/etcd/server/v3 ;;
    kubernetes)
      k8s_dir=$(kubernetes_module)
      for cmd in kube-apiserver kube-controller-manager kube-scheduler kubectl kubelet kube-proxy; do
        build $cmd $K8S "$k8s_dir" k8s.io/kubernetes/cmd/$cmd "$k8s_ldflags"
      done ;;
    kueue) build kueue $KUEUE "$here/tools/kueue" sigs.k8s.io/kueue/cmd/kueue "-X sigs.k8s.io/kueue/pkg/version.GitVersion=$KUEUE" ;;
    kwok) build kwok $KWOK "$here/tools/kwok" sigs.k8s.io/kwok/cmd/kwok ;;
    # Stamped, because the package manager checks a package's `crossplane.version` constraint against it.
    crossplane) CGO_ENABLED=0 build crossplane $CROSSPLANE "$here/.." github.com/crossplane/crossplane/v2/cmd/crossplane \
      "-X github.com/crossplane/crossplane-runtime/v2/pkg/version.version=$CROSSPLANE" --version ;;
    crossplane-cli) build crossplane-cli $CROSSPLANE_CLI "$here/tools/crossplane-cli" github.com/crossplane/cli/v2/cmd/crossplane ;;
    function-patch-and-transform) CGO_ENABLED=0 build function-patch-and-transform $PATCH_AND_TRANSFORM "$here/tools/function-patch-and-transform" \
      github.com/crossplane-contrib/function-patch-and-transform ;;
    coredns) CGO_ENABLED=0 build coredns $COREDNS "$here/tools/coredns" . \
      "-X github.com/coredns/coredns/coremain.GitCommit=$COREDNS" ;;
    inference-sim) CGO_ENABLED=0 build llm-d-inference-sim $INFERENCE_SIM "$here/tools/inference-sim" \
      github.com/llm-d/llm-d-inference-sim/cmd/llm-d-inference-sim ;;
    # As containerd's Makefile builds them, without cgo (only the btrfs snapshotter and PKCS#11
    # image decryption need it).
    containerd)
      for cmd in containerd containerd-shim-runc-v2 ctr; do
        CGO_ENABLED=0 BUILD_TAGS="urfave_cli_no_docs no_btrfs" build $cmd $CONTAINERD "$here/tools/containerd" \
          github.com/containerd/containerd/v2/cmd/$cmd "-X github.com/containerd/containerd/v2/version.Version=$CONTAINERD"
      done ;;
    # runc needs cgo and libseccomp (Debian's libseccomp-dev): a Pod of Pod Security's restricted
    # profile asks for the runtime's default seccomp profile. libpathrs, a Rust library Debian does not
    # package, is left out as runc's build tags allow: runc falls back to its Go implementation.
    runc) CGO_ENABLED=1 BUILD_TAGS="seccomp urfave_cli_no_docs" build runc $RUNC "$here/tools/runc" \
      github.com/opencontainers/runc "-X main.gitCommit=$RUNC" ;;
    cni-plugins)
      for plugin in main/bridge main/loopback ipam/host-local meta/portmap; do
        CGO_ENABLED=0 build "cni-plugins-$CNI_PLUGINS/${plugin#*/}" "" "$here/tools/cni-plugins" \
          github.com/containernetworking/plugins/plugins/$plugin \
          "-X github.com/containernetworking/plugins/pkg/utils/buildversion.BuildVersion=$CNI_PLUGINS"
      done ;;
    *) echo "unknown component $c" >&2; exit 2 ;;
  esac
done
