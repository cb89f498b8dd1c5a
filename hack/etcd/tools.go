//go:build tools

// Package tools pins the etcd that Sprout's tests and demo run against.
package tools

import _ "go.etcd.io/etcd/server/v3"
