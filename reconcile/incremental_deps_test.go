package reconcile_test

import (
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/sprout-gitops/sprout/fixtures"
)

// The part of TestIncrementalSyncAgreesWithFullRecompute where each
// trigger reads sources of its own: incr-clone clones the ConfigMap
// incr-src/c-<k> its label src=<k> names (resource.Get), incr-pick lists
// the ConfigMaps of incr-src labelled pick=<k> (resource.List with a
// selector). The sources change value and labels, go and come back.

// incrSourceCount is how many sources c-<k> there are.
const incrSourceCount = 3

// incrSource is the model of one source ConfigMap.
type incrSource struct {
	value, pick string
	exists      bool
}

// incrDeps is the model of the sources and of the triggers' src labels.
type incrDeps struct {
	sources [incrSourceCount]incrSource
	src     map[types.NamespacedName]string // "" for none
	// generated: each policy has generated an object. Until one has, its
	// record is still being rebuilt, which keeps every sync full.
	generated [2]bool
}

func newIncrDeps() *incrDeps {
	d := &incrDeps{src: map[types.NamespacedName]string{}}
	for k := range d.sources {
		d.sources[k] = incrSource{value: "x", pick: fmt.Sprint(k), exists: true}
	}
	return d
}

// setupDeps creates the sources and applies incr-clone and incr-pick.
func (r *incrRun) setupDeps() {
	r.t.Helper()
	for k := range r.model.deps.sources {
		r.putSource(k)
	}
	for _, p := range []struct{ file, name, suffix string }{{"clone-own-source", "incr-clone", "c"}, {"lookup-own-sources", "incr-pick", "p"}} {
		r.tb.applyPolicy(fixtures.MustPolicyFile(p.file, fixtures.Params{Name: p.name, App: "incr", Source: "incr-src", Suffix: p.suffix}))
		r.t.Cleanup(func() { r.tb.deletePolicy(p.name) })
	}
}

// putSource writes source k as the model has it.
func (r *incrRun) putSource(k int) {
	r.t.Helper()
	s := r.model.deps.sources[k]
	cms := r.kube.CoreV1().ConfigMaps("incr-src")
	name := fmt.Sprintf("c-%d", k)
	if !s.exists {
		if err := cms.Delete(r.ctx, name, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
			r.t.Fatal(err)
		}
		return
	}
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "incr-src", Labels: map[string]string{"pick": s.pick}},
		Data: map[string]string{"v": s.value}}
	_, err := cms.Update(r.ctx, cm, metav1.UpdateOptions{})
	if apierrors.IsNotFound(err) {
		_, err = cms.Create(r.ctx, cm, metav1.CreateOptions{})
	}
	if err != nil {
		r.t.Fatal(err)
	}
}

// wantDeps adds what incr-clone and incr-pick generate to objects, and
// returns how many objects each generates.
func (m *incrModel) wantDeps(objects map[string]map[string]string) (clones, picks int) {
	for n := range m.triggers {
		k := m.deps.src[n]
		if k == "" {
			continue
		}
		var picked []string
		for j, s := range m.deps.sources {
			if !s.exists {
				continue
			}
			if fmt.Sprint(j) == k {
				objects[n.Namespace+"/"+n.Name+"-c"] = map[string]string{"v": s.value}
				clones++
			}
			if s.pick == k {
				picked = append(picked, fmt.Sprintf("c-%d=%s", j, s.value))
			}
		}
		objects[n.Namespace+"/"+n.Name+"-p"] = map[string]string{"picked": strings.Join(picked, ",")}
		picks++
	}
	return clones, picks
}

// stepDeps makes one random change to a source or to the src label of
// trigger pick (when there is one).
func (r *incrRun) stepDeps(pick types.NamespacedName, some bool) {
	r.t.Helper()
	d := r.model.deps
	k := r.rng.IntN(incrSourceCount)
	s := &d.sources[k]
	switch p := r.rng.IntN(100); {
	case p < 40 && some:
		d.src[pick] = ""
		if v := r.rng.IntN(incrSourceCount + 1); v < incrSourceCount {
			d.src[pick] = fmt.Sprint(v)
		}
		r.patchTrigger(pick, fmt.Sprintf(`{"metadata":{"labels":{"src":%s}}}`, labelValue(d.src[pick] != "", d.src[pick])))
	case p < 70:
		s.value, s.exists = fmt.Sprint(r.rng.IntN(1000)), true
	case p < 90:
		s.pick, s.exists = fmt.Sprint(r.rng.IntN(incrSourceCount)), true
	default:
		s.exists = !s.exists
	}
	r.putSource(k)
}

// probeDeps changes the value of one source and checks that incr-clone
// and incr-pick synced it incrementally, evaluating only the triggers
// that read it: each once, and again when what was written for it comes
// back (an evaluation that read another object is not kept), at most
// twice. It runs once the controller is idle after a full sync, which
// took whatever the batch had marked. A policy that has generated nothing
// yet is not checked: its record is still being rebuilt from its objects,
// and all its syncs are full until it writes one.
func (r *incrRun) probeDeps(h *recompute, done int) {
	r.t.Helper()
	d := r.model.deps
	k := r.rng.IntN(incrSourceCount)
	if !d.sources[k].exists {
		return
	}
	var clones, picks float64
	for n := range r.model.triggers {
		switch d.src[n] {
		case fmt.Sprint(k):
			clones++
			if d.sources[k].pick == d.src[n] {
				picks++
			}
		case d.sources[k].pick:
			picks++
		}
	}
	var now [2]int
	now[0], now[1] = r.model.wantDeps(map[string]map[string]string{})
	policies := map[string]float64{}
	for i, p := range []string{"GeneratingPolicy/incr-clone", "GeneratingPolicy/incr-pick"} {
		d.generated[i] = d.generated[i] || now[i] > 0
		if d.generated[i] {
			policies[p] = []float64{clones, picks}[i]
		}
	}
	count := func(p, name, label, value string) float64 {
		return max(metricValue(r.t, h.reg, name, map[string]string{"policy": p, label: value}), 0)
	}
	before := map[string][2]float64{}
	for p := range policies {
		before[p] = [2]float64{count(p, "sprout_syncs_total", "mode", "full"), count(p, "sprout_evaluations_total", "result", "evaluated")}
	}
	d.sources[k].value = fmt.Sprintf("probe%d", done)
	said := h.said.len()
	r.putSource(k)
	r.converged(h.c, done)
	for p, readers := range policies {
		fulls := count(p, "sprout_syncs_total", "mode", "full") - before[p][0]
		evaluated := count(p, "sprout_evaluations_total", "result", "evaluated") - before[p][1]
		if fulls != 0 || evaluated < readers || evaluated > 3*readers {
			r.t.Errorf("after %d events, %s: a change of c-%d, which %v triggers read, made %v full syncs and %v evaluations; the controller said:\n%s",
				done, p, k, readers, fulls, evaluated, h.said.since(said, p))
		}
	}
}
