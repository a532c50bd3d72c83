#!/usr/bin/env bash
# Adds a Kubernetes release to the test matrix: test/k8s/<version>/go.mod, a module whose only job is to
# build that release's kube-apiserver and kube-scheduler from the Go module proxy (`make k8s-<version>`).
# k8s.io/kubernetes points its staging modules at ./staging, which a consumer cannot follow, so each is
# pinned here to the matching v0.<minor>.<patch>, read from that release's own go.mod.
# STAGING_FALLBACK=v0.X.Y pins a staging module the proxy does not serve at that version to v0.X.Y instead,
# and says so: pre-releases are published incompletely (k8s.io/kube-proxy v0.38.0-alpha.0 is missing),
# and next.sh builds only kube-apiserver, which needs such a module for its OpenAPI definitions alone.
set -euo pipefail
version=${1:?usage: add-release.sh vX.Y.Z [DIR] (a k8s.io/kubernetes release on the module proxy; DIR defaults to test/k8s/vX.Y.Z)}
[[ $version =~ ^v1\.([0-9]+)\.([0-9]+)(-[0-9A-Za-z.]+)?$ ]] || { echo "not a release: $version" >&2; exit 2; }
staging=v0.${BASH_REMATCH[1]}.${BASH_REMATCH[2]}${BASH_REMATCH[3]}
dir=${2:-$(cd "$(dirname "$0")" && pwd)/$version}
gomod=$(go mod download -json "k8s.io/kubernetes@$version" | sed -n 's/^\t"GoMod": "\(.*\)",$/\1/p')
[ -n "$gomod" ] || { echo "k8s.io/kubernetes@$version is not on the module proxy" >&2; exit 1; }
mkdir -p "$dir"
{
  echo "// Builds kube-apiserver and kube-scheduler $version for the test matrix; see ../README.md."
  echo "module github.com/wincompat/wincompat/test/k8s/$version"
  echo
  echo "go $(go env GOVERSION | sed 's/^go//; s/\.[0-9]*$/.0/')"
  echo
  echo "require k8s.io/kubernetes $version"
  echo
  echo "tool ("
  echo "	k8s.io/kubernetes/cmd/kube-apiserver"
  echo "	k8s.io/kubernetes/cmd/kube-scheduler"
  echo ")"
  echo
  echo "replace ("
  for m in $(awk '$1=="replace"{r=1;next} r&&$1==")"{r=0} r&&$2=="=>"&&$3~/^\.\/staging\//{print $1}' "$gomod"); do
    pin=$staging
    if [ -n "${STAGING_FALLBACK:-}" ] && ! go mod download "$m@$staging" 2>/dev/null; then
      pin=$STAGING_FALLBACK
      echo "add-release: the module proxy does not serve $m@$staging; pinned to $pin" >&2
    fi
    printf '\t%s => %s %s\n' "$m" "$m" "$pin"
  done
  echo ")"
} > "$dir/go.mod"
(cd "$dir" && go mod tidy)
echo "added $dir"
if [ -z "${2:-}" ]; then echo "build it with: make k8s-$version"; fi
