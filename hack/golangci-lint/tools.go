//go:build tools

// Package tools pins the golangci-lint that `make lint` runs.
package tools

import _ "github.com/golangci/golangci-lint/v2/cmd/golangci-lint"
