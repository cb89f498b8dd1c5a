#!/usr/bin/env bash
# Prints the folder whose kube-apiserver and etcd `make tools` reuses, or
# nothing when it must build them from source. It runs offline. In order:
#
#   1. $KUBEBUILDER_ASSETS, when it holds both and its kube-apiserver is
#      1.$KUBE_MINOR.x (a folder that does not is reported, and skipped);
#   2. bin/, when `make tools` built the pinned versions there ($BIN_READY);
#   3. setup-envtest's cache, the highest 1.$KUBE_MINOR.x it holds for this
#      machine: ${XDG_DATA_HOME:-~/.local/share}/kubebuilder-envtest/k8s/<version>-linux-<arch>/.
#
# Any 1.$KUBE_MINOR.x patch release is accepted: the tests and the demo
# need the minor the Go modules pin (k8s.io/* 0.$KUBE_MINOR), not its patch.
# Any etcd the folder holds is taken with it, as setup-envtest ships them.
set -uo pipefail

minor=${KUBE_MINOR:?KUBE_MINOR unset}
both() { [[ -x $1/kube-apiserver && -x $1/etcd ]]; }

if [[ -n ${KUBEBUILDER_ASSETS:-} ]]; then
	dir=$KUBEBUILDER_ASSETS
	if ! both "$dir"; then
		echo "KUBEBUILDER_ASSETS=$dir: no executable kube-apiserver and etcd there; not used" >&2
	elif version=$("$dir/kube-apiserver" --version 2>/dev/null) && [[ $version =~ ^Kubernetes\ v1\.$minor\. ]]; then
		echo "$dir"
		exit 0
	else
		echo "KUBEBUILDER_ASSETS=$dir: its kube-apiserver is ${version:-unreadable}, not 1.$minor.x; not used" >&2
	fi
fi

if [[ -n ${BIN_READY:-} ]]; then
	echo "${BIN:?BIN unset}"
	exit 0
fi

case $(uname -m) in
x86_64 | amd64) arch=amd64 ;;
aarch64 | arm64) arch=arm64 ;;
*) exit 0 ;;
esac
cache=${XDG_DATA_HOME:-$HOME/.local/share}/kubebuilder-envtest/k8s
shopt -s nullglob
for dir in $(printf '%s\n' "$cache"/1."$minor".*-linux-"$arch" | sort -t. -k3,3nr); do
	if both "$dir"; then
		echo "$dir"
		exit 0
	fi
done
