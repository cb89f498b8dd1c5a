package inventory

import (
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"

	sproutv1alpha1 "github.com/sprout-gitops/sprout/api/sprout/v1alpha1"
)

// createdVersions pairs the versions Sprout's creates made holding their
// desired state entire with the cached copies the watch brings of them,
// so that the cache keeps those released (CachedFromJSON) and a cold start
// that creates 10,000 objects does not hold their JSON as well. Either may
// come first: the create's answer and the watch event travel apart. Whichever comes second
// finds the other and releases the copy. What finds no partner (a version
// changed again before the watch listed it anew, an event of another
// writer's version) is forgotten after one to two createdMemory.
type createdVersions struct {
	mu sync.Mutex
	// made are the stamps of versions created and not watched yet;
	// watched, the cached copies of versions whose create's answer has
	// not been read yet. Each has the entries of the last createdMemory
	// and of the one before.
	made, madeBefore       map[versionKey]string
	watched, watchedBefore map[versionKey]*Cached
	rotated                time.Time
}

type versionKey struct{ namespace, name, resourceVersion string }

// createdMemory is how long a version waits for its partner, at least:
// events follow their writes within seconds.
const createdMemory = time.Minute

// rotate forgets what waited longer than two createdMemory. Called with
// mu held.
func (v *createdVersions) rotate() {
	if now := time.Now(); v.made == nil || now.Sub(v.rotated) > createdMemory {
		v.madeBefore, v.made = v.made, map[versionKey]string{}
		v.watchedBefore, v.watched = v.watched, map[versionKey]*Cached{}
		v.rotated = now
	}
}

// add takes the answer of obj's create, which made version
// resourceVersion holding obj entire.
func (v *createdVersions) add(obj *unstructured.Unstructured, resourceVersion string) {
	stamp := metadataStrings(obj, "annotations").get(sproutv1alpha1.AnnotationApplied)
	if stamp == "" || resourceVersion == "" {
		return
	}
	m := metadataStrings(obj, "")
	k := versionKey{m.get("namespace"), m.get("name"), resourceVersion}
	v.mu.Lock()
	defer v.mu.Unlock()
	v.rotate()
	for _, w := range []map[versionKey]*Cached{v.watched, v.watchedBefore} {
		if c, ok := w[k]; ok {
			delete(w, k)
			c.release(stamp)
			return
		}
	}
	v.made[k] = stamp
}

// watch takes c, a version the watch brought.
func (v *createdVersions) watch(c *Cached) {
	v.mu.Lock()
	defer v.mu.Unlock()
	if stamp, ok := v.takeMade(c); ok {
		c.release(stamp)
		return
	}
	v.watched[versionKey{c.namespace, c.name, c.resourceVersion}] = c
}

// claim takes the stamp of c's version when a create made it and its
// answer came before the watch: c is released from the start.
func (v *createdVersions) claim(c *Cached) (string, bool) {
	v.mu.Lock()
	defer v.mu.Unlock()
	return v.takeMade(c)
}

// takeMade takes the stamp of c's version when a create made it. Called
// with mu held.
func (v *createdVersions) takeMade(c *Cached) (string, bool) {
	k := versionKey{c.namespace, c.name, c.resourceVersion}
	v.rotate()
	for _, m := range []map[versionKey]string{v.made, v.madeBefore} {
		if stamp, ok := m[k]; ok {
			delete(m, k)
			return stamp, true
		}
	}
	return "", false
}

// CachedFromObject returns obj, a typed object as a protobuf watch of a's
// objects decoded it, as a cache holds it, as CachedFromJSON does for
// JSON: a version a's create made as desired is kept released, and its
// JSON, when the create's answer came first, never encoded (half the
// events of a cold start). obj is the caller's to give away.
func (a *Applier) CachedFromObject(obj runtime.Object) (*Cached, error) {
	c, err := cachedIdentity(obj)
	if err != nil {
		return nil, err
	}
	if stamp, ok := a.created.claim(c); ok {
		c.body.Store(&cachedBody{holds: stamp})
		return c, nil
	}
	if err := c.encode(obj); err != nil {
		return nil, err
	}
	a.created.watch(c)
	return c, nil
}

// CachedFromJSON is the package's CachedFromJSON for the watches of a's
// objects: a version a's create made as desired is kept released.
func (a *Applier) CachedFromJSON(raw []byte) (*Cached, error) {
	c, err := CachedFromJSON(raw)
	if err != nil {
		return nil, err
	}
	a.created.watch(c)
	return c, nil
}
