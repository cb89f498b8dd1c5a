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
// A version created and not cached yet is one a sync that reads the cache
// cannot see. A later sync of its policy that prunes marks those of its
// triggers it looked for (Overlook), so that their trigger is looked at
// again once they are cached and what that sync no longer wanted is
// pruned then. A version whose create's answer was not paired yet is
// cached unreleased, as any version Sprout did not create is, and
// reconcile's confirmation looks at it. One released already, on its way
// from the watch to the cache, is reported once the cache holds it
// (Cached): the watch decodes an event before the cache stores it, and
// a sync may look in between.
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
	made, madeBefore       map[versionKey]*madeVersion
	watched, watchedBefore map[versionKey]*watchedVersion
	// transit are the versions released and not yet in the cache.
	transit, transitBefore map[versionKey]*madeVersion
	rotated                time.Time
	// encoding runs the encodings of the versions a rotation forgot.
	encoding sync.WaitGroup
}

type versionKey struct{ namespace, name, resourceVersion string }

func keyOf(o *Object) versionKey { return versionKey{o.namespace, o.name, o.resourceVersion} }

// watchedVersion is a cached copy waiting for its create's answer, and
// whether the cache holds it yet.
type watchedVersion struct {
	o      *Object
	cached bool
}

// madeVersion is a version a create made, waiting for the watch.
type madeVersion struct {
	stamp string
	// policy and trigger are its AnnotationPolicy and LabelTriggerUID; at,
	// when its create's answer was read.
	policy, trigger string
	at              time.Time
	// overlooked: a sync of its policy looked for its trigger's objects
	// after it was made and before it was cached, or, in transit, released
	// before it was cached.
	overlooked bool
}

// createdMemory is how long a version waits for its partner, at least:
// events follow their writes within seconds.
const createdMemory = time.Minute

// rotate forgets what waited longer than two createdMemory. Called with
// mu held.
func (v *CreatedVersions) rotate() {
	if now := time.Now(); v.made == nil || now.Sub(v.rotated) > createdMemory {
		if len(v.watchedBefore) > 0 {
			// No answer will release these now: those still pending (as
			// another shard's creates stay) are encoded, off the lock, so
			// that the cache keeps their JSON rather than their typed
			// objects.
			pending := v.watchedBefore
			v.encoding.Go(func() { encodePending(pending) })
		}
		v.madeBefore, v.made = v.made, map[versionKey]*madeVersion{}
		v.watchedBefore, v.watched = v.watched, map[versionKey]*watchedVersion{}
		v.transitBefore, v.transit = v.transit, map[versionKey]*madeVersion{}
		v.rotated = now
	}
}

// encodePending encodes the content of the pending versions of watched.
func encodePending(watched map[versionKey]*watchedVersion) {
	for _, w := range watched {
		w.o.json()
	}
}

// Created takes the answer of obj's create, which made version
// resourceVersion holding obj, a desired object, entire.
func (v *CreatedVersions) Created(obj *unstructured.Unstructured, resourceVersion string) {
	md, _ := obj.Object["metadata"].(map[string]any)
	annotations, _ := md["annotations"].(map[string]any)
	labels, _ := md["labels"].(map[string]any)
	stamp := str(annotations, sproutv1alpha1.AnnotationApplied)
	if v == nil || stamp == "" || resourceVersion == "" {
		return
	}
	k := versionKey{str(md, "namespace"), str(md, "name"), resourceVersion}
	v.mu.Lock()
	defer v.mu.Unlock()
	v.rotate()
	made := func() *madeVersion {
		return &madeVersion{stamp: stamp, policy: str(annotations, sproutv1alpha1.AnnotationPolicy),
			trigger: str(labels, sproutv1alpha1.LabelTriggerUID), at: time.Now()}
	}
	for _, w := range []map[versionKey]*watchedVersion{v.watched, v.watchedBefore} {
		if wv, ok := w[k]; ok {
			delete(w, k)
			wv.o.Release(stamp)
			if !wv.cached {
				v.transit[k] = made()
			}
			return
		}
	}
	v.made[k] = made()
}

// Overlook marks the versions of policy (an AnnotationPolicy) whose
// create's answer was read before since and that are not cached yet, of
// the triggers for which trigger reports true (nil: every trigger): a
// sync that began at since is about to look for them in the cache, where
// they are not. They will be cached unreleased.
func (v *CreatedVersions) Overlook(policy string, trigger func(string) bool, since time.Time) {
	if v == nil {
		return
	}
	v.mu.Lock()
	defer v.mu.Unlock()
	for _, m := range []map[versionKey]*madeVersion{v.made, v.madeBefore, v.transit, v.transitBefore} {
		for _, mv := range m {
			if mv.policy == policy && mv.at.Before(since) && (trigger == nil || trigger(mv.trigger)) {
				mv.overlooked = true
			}
		}
	}
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
	v.watched[keyOf(o)] = &watchedVersion{o: o}
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

// takeMade takes the stamp of o's version when a create made it, and no
// sync overlooked it: o is released, and in transit until Cached. Called
// with mu held.
func (v *CreatedVersions) takeMade(o *Object) (string, bool) {
	k := keyOf(o)
	v.rotate()
	for _, m := range []map[versionKey]*madeVersion{v.made, v.madeBefore} {
		if mv, ok := m[k]; ok {
			delete(m, k)
			if mv.overlooked {
				return "", false
			}
			v.transit[k] = mv
			return mv.stamp, true
		}
	}
	return "", false
}

// Cached takes o, a version the cache has just added, and reports whether
// it was released on its way there and a sync of its policy overlooked
// it meanwhile: its trigger must be looked at again.
func (v *CreatedVersions) Cached(o *Object) bool {
	if v == nil {
		return false
	}
	k := keyOf(o)
	v.mu.Lock()
	defer v.mu.Unlock()
	v.rotate()
	for _, m := range []map[versionKey]*madeVersion{v.transit, v.transitBefore} {
		if mv, ok := m[k]; ok {
			delete(m, k)
			return mv.overlooked
		}
	}
	for _, w := range []map[versionKey]*watchedVersion{v.watched, v.watchedBefore} {
		if wv, ok := w[k]; ok {
			wv.cached = true
		}
	}
	return false
}
