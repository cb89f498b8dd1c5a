package cluster

import "strconv"

// Older reports whether resourceVersion a is older than b: a cache that has
// not yet seen a write of Sprout's holds an older version than the write
// returned. The API server's versions are etcd revisions, which grow with
// every write; a version that is not a number is never older, so a caller
// comparing a cache with its own write trusts the cache.
func Older(a, b string) bool {
	x, errA := strconv.ParseUint(a, 10, 64)
	y, errB := strconv.ParseUint(b, 10, 64)
	return errA == nil && errB == nil && x < y
}
