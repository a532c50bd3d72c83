#!/usr/bin/env bash
# Follows the next Kubernetes minor release before it ships: finds the newest pre-release of
# k8s.io/kubernetes for the minor after test/go.mod's on the module proxy, builds its kube-apiserver into
# bin/k8s/<version>/ (its module in bin/k8s/src/<version>, never committed) and runs the strip-table probe
# against it, writing test/e2e/releases/testdata/striptable/<version>.json. Run by `make e2e-matrix`, not by CI.
# Exits 0 when no pre-release is published yet, and says so.
set -euo pipefail
cd "$(dirname "$0")/../.."
current=$(awk '$1=="k8s.io/kubernetes"{print $2}' test/go.mod)
minor=$(echo "$current" | cut -d. -f2)
next="v1.$((minor + 1)).0-"
# The proxy's version list can lag behind what it serves (on 2026-11-26 it listed no 1.38 pre-release
# of k8s.io/kubernetes, yet served v1.38.0-alpha.0 when asked by name), so the staging modules'
# pre-releases name candidates too, and each is asked for exactly, newest first.
candidates=$(cd test && { go list -m -versions k8s.io/kubernetes; go list -m -versions k8s.io/api | sed 's/\bv0\./v1./g'; } |
  tr ' ' '\n' | grep -F "$next" | sort -Vru || true)
version=
for c in $candidates; do
  if (cd test && go list -m "k8s.io/kubernetes@$c" >/dev/null 2>&1); then version=$c; break; fi
done
if [ -z "$version" ]; then
  echo "next release: the module proxy serves no k8s.io/kubernetes ${next}* yet${candidates:+ (tried: $(echo $candidates))}: nothing to probe"
  exit 0
fi
root=$PWD
src=$root/bin/k8s/src/$version
out=$root/bin/k8s/$version
if [ ! -x "$out/kube-apiserver" ]; then
  STAGING_FALLBACK=v0.${current#v1.} test/k8s/add-release.sh "$version" "$src"
  mkdir -p "$out"
  (cd "$src" && go build -trimpath -ldflags="-s -X k8s.io/component-base/version.gitVersion=$version \
    -X k8s.io/component-base/version.gitMajor=1 -X k8s.io/component-base/version.gitMinor=$((minor + 1)) \
    -X k8s.io/component-base/version.gitTreeState=clean" -o "$out/" k8s.io/kubernetes/cmd/kube-apiserver)
  ln -f "$root/bin/k8s/$current/etcd" "$out/"
fi
echo "next release: probing $version"
cd test && UPDATE_GOLDEN=1 WINCOMPAT_K8S_VERSION=$version go test -count=1 -run '^TestStripTableProbe$' ./e2e/releases/
