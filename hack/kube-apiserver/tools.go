//go:build tools

// Package tools pins the kube-apiserver that Sprout's tests and demo run against.
package tools

import _ "k8s.io/kubernetes/cmd/kube-apiserver"
