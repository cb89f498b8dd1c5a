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
// triggers it looked for (Overlook): they are cached unreleased, as any
// version Sprout did not create is, so that their trigger is looked at
// again once they are (reconcile's confirmation) and what that sync no
// longer wanted is pruned then.
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
	watched, watchedBefore map[versionKey]*Object
	rotated                time.Time
}

type versionKey struct{ namespace, name, resourceVersion string }

// madeVersion is a version a create made, waiting for the watch.
type madeVersion struct {
	stamp string
	// policy and trigger are its AnnotationPolicy and LabelTriggerUID; at,
	// when its create's answer was read.
	policy, trigger string
	at              time.Time
	// overlooked: a sync of its policy looked for its trigger's objects
	// after it was made and before it was cached.
	overlooked bool
}

// createdMemory is how long a version waits for its partner, at least:
// events follow their writes within seconds.
const createdMemory = time.Minute

// rotate forgets what waited longer than two createdMemory. Called with
// mu held.
func (v *CreatedVersions) rotate() {
	if now := time.Now(); v.made == nil || now.Sub(v.rotated) > createdMemory {
		v.madeBefore, v.made = v.made, map[versionKey]*madeVersion{}
		v.watchedBefore, v.watched = v.watched, map[versionKey]*Object{}
		v.rotated = now
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
	for _, w := range []map[versionKey]*Object{v.watched, v.watchedBefore} {
		if o, ok := w[k]; ok {
			delete(w, k)
			o.Release(stamp)
			return
		}
	}
	v.made[k] = &madeVersion{stamp: stamp, policy: str(annotations, sproutv1alpha1.AnnotationPolicy),
		trigger: str(labels, sproutv1alpha1.LabelTriggerUID), at: time.Now()}
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
	for _, m := range []map[versionKey]*madeVersion{v.made, v.madeBefore} {
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

// takeMade takes the stamp of o's version when a create made it, and no
// sync overlooked it. Called with mu held.
func (v *CreatedVersions) takeMade(o *Object) (string, bool) {
	k := versionKey{o.namespace, o.name, o.resourceVersion}
	v.rotate()
	for _, m := range []map[versionKey]*madeVersion{v.made, v.madeBefore} {
		if mv, ok := m[k]; ok {
			delete(m, k)
			return mv.stamp, !mv.overlooked
		}
	}
	return "", false
}
