package cluster

import (
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	sproutv1alpha1 "github.com/sprout-gitops/sprout/api/sprout/v1alpha1"
)

// CreatedVersions pairs the versions Sprout's creates made holding their
// desired state entire with the cached copies the watch brings of them,
// so that the cache keeps those released and a cold start that creates
// many objects does not hold their JSON as well. Either may come first:
// the create's answer and the watch event travel apart. Whichever comes
// second finds the other and releases the copy. What finds no partner (a
// version changed again before the watch listed it anew, an event of
// another writer's version) is forgotten after one to two createdMemory.
//
// Every writer of Sprout's reports to the one CreatedVersions the caches
// of generated objects read through (Generated), whoever it writes as: a
// ServiceAccount's writes are cached as Sprout's own are. A nil
// CreatedVersions pairs nothing.
type CreatedVersions struct {
	mu sync.Mutex
	// made are the stamps of versions created and not watched yet;
	// watched, the cached copies of versions whose create's answer has
	// not been read yet. Each has the entries of the last createdMemory
	// and of the one before.
	made, madeBefore       map[versionKey]string
	watched, watchedBefore map[versionKey]*Object
	rotated                time.Time
}

type versionKey struct{ namespace, name, resourceVersion string }

// createdMemory is how long a version waits for its partner, at least:
// events follow their writes within seconds.
const createdMemory = time.Minute

// rotate forgets what waited longer than two createdMemory. Called with
// mu held.
func (v *CreatedVersions) rotate() {
	if now := time.Now(); v.made == nil || now.Sub(v.rotated) > createdMemory {
		v.madeBefore, v.made = v.made, map[versionKey]string{}
		v.watchedBefore, v.watched = v.watched, map[versionKey]*Object{}
		v.rotated = now
	}
}

// Created takes the answer of obj's create, which made version
// resourceVersion holding obj, a desired object, entire.
func (v *CreatedVersions) Created(obj *unstructured.Unstructured, resourceVersion string) {
	md, _ := obj.Object["metadata"].(map[string]any)
	annotations, _ := md["annotations"].(map[string]any)
	stamp := str(annotations, sproutv1alpha1.AnnotationApplied)
	if v == nil || stamp == "" || resourceVersion == "" {
		return
	}
	k := versionKey{str(md, "namespace"), str(md, "name"), resourceVersion}
	v.mu.Lock()
	defer v.mu.Unlock()
	v.rotate()
	for _, w := range []map[versionKey]*Object{v.watched, v.watchedBefore} {
		if o, ok := w[k]; ok {
			delete(w, k)
			o.Release(stamp)
			return
		}
	}
	v.made[k] = stamp
}

// watch takes o, a version the watch brought.
func (v *CreatedVersions) watch(o *Object) {
	if v == nil {
		return
	}
	v.mu.Lock()
	defer v.mu.Unlock()
	if stamp, ok := v.takeMade(o); ok {
		o.Release(stamp)
		return
	}
	v.watched[versionKey{o.namespace, o.name, o.resourceVersion}] = o
}

// claim takes the stamp of o's version when a create made it and its
// answer came before the watch: o is released from the start.
func (v *CreatedVersions) claim(o *Object) (string, bool) {
	if v == nil {
		return "", false
	}
	v.mu.Lock()
	defer v.mu.Unlock()
	return v.takeMade(o)
}

// takeMade takes the stamp of o's version when a create made it. Called
// with mu held.
func (v *CreatedVersions) takeMade(o *Object) (string, bool) {
	k := versionKey{o.namespace, o.name, o.resourceVersion}
	v.rotate()
	for _, m := range []map[versionKey]string{v.made, v.madeBefore} {
		if stamp, ok := m[k]; ok {
			delete(m, k)
			return stamp, true
		}
	}
	return "", false
}
