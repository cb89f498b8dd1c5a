package inventory

import (
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// createdVersions remembers the versions Sprout's creates made holding
// their desired state entire, with that state's stamp, until the watch
// brings them: the cache then keeps them released (CachedFromJSON), and a
// cold start that creates 10,000 objects does not hold their JSON as well.
// The watch may bring a version before the create's answer: the copy
// already cached is released then instead. A version the watch never
// brings (its object changed again before the watch listed it anew) is
// forgotten after one to two createdMemory.
type createdVersions struct {
	mu       sync.Mutex
	cur, old map[versionKey]string
	rotated  time.Time
}

type versionKey struct{ namespace, name, resourceVersion string }

// createdMemory is how long a created version waits for its watch event,
// at least: events follow their writes within seconds.
const createdMemory = time.Minute

// add remembers that obj's create made version resourceVersion holding
// obj entire, or releases the copy live already holds.
func (v *createdVersions) add(obj *unstructured.Unstructured, resourceVersion string, live Live) {
	stamp := metadataStrings(obj, "annotations").get(AnnotationApplied)
	if stamp == "" || resourceVersion == "" {
		return
	}
	if cached, ok := cachedOf(live, obj); ok && cached.resourceVersion == resourceVersion {
		cached.release(stamp)
		return
	}
	m := metadataStrings(obj, "")
	v.mu.Lock()
	defer v.mu.Unlock()
	if now := time.Now(); v.cur == nil || now.Sub(v.rotated) > createdMemory {
		v.old, v.cur, v.rotated = v.cur, make(map[versionKey]string), now
	}
	v.cur[versionKey{m.get("namespace"), m.get("name"), resourceVersion}] = stamp
}

// take returns, and forgets, the stamp of the desired state a create made
// c's version hold.
func (v *createdVersions) take(c *Cached) (string, bool) {
	k := versionKey{c.namespace, c.name, c.resourceVersion}
	v.mu.Lock()
	defer v.mu.Unlock()
	for _, m := range []map[versionKey]string{v.cur, v.old} {
		if stamp, ok := m[k]; ok {
			delete(m, k)
			return stamp, true
		}
	}
	return "", false
}

// CachedFromJSON is the package's CachedFromJSON for the caches of a's
// objects: a version a's create made as desired is kept released.
func (a *Applier) CachedFromJSON(raw []byte) (*Cached, error) {
	c, err := CachedFromJSON(raw)
	if err != nil {
		return nil, err
	}
	if stamp, ok := a.created.take(c); ok {
		c.release(stamp)
	}
	return c, nil
}
