package reconcile_test

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"

	sproutv1alpha1 "github.com/sprout-gitops/sprout/api/sprout/v1alpha1"
	"github.com/sprout-gitops/sprout/fixtures"
	"github.com/sprout-gitops/sprout/internal/manifest"
	"github.com/sprout-gitops/sprout/reconcile"
)

// The fixtures library-* are policies of the kind platform teams take from
// Kyverno's policy library (#46). Each test below runs one of them
// unchanged but for its name, its generateExisting switch and a label its
// triggers must carry, so that it selects only this test's triggers, and
// checks Kyverno's semantics: a trigger created after the policy gets what
// expected.yaml holds; one that existed before gets it only with
// generateExisting; with synchronize a deleted object comes back and goes
// with its trigger, without it stays deleted and outlives its trigger.

// libraryLabel is the label a library test's triggers carry, whose value
// is the policy that is to select them.
const libraryLabel = "sprout.dev/library-test"

func TestLibraryNamespaceQuota(t *testing.T) {
	runLibrary(t, "library-ns-quota", true)
}

func TestLibraryDefaultDenyNetworkPolicy(t *testing.T) {
	runLibrary(t, "library-networkpolicy", true)
}

func TestLibraryRoleBinding(t *testing.T) {
	// Kyverno writes the binding as its own account; Sprout, a
	// cluster-admin here, does so once the operator allows it.
	lib := runLibrary(t, "library-rolebinding", true, func(o *reconcile.Options) { o.AllowUnnamedGrants = true })
	kube := kubernetes.NewForConfigOrDie(cfg)
	ns := lib.ns("new-on")
	relabel := func(t *testing.T, value *string) {
		t.Helper()
		n, err := kube.CoreV1().Namespaces().Get(context.Background(), ns, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if value == nil {
			delete(n.Labels, "team")
		} else {
			n.Labels["team"] = *value
		}
		if _, err := kube.CoreV1().Namespaces().Update(context.Background(), n, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	binding := func(ctx context.Context) (*unstructured.Unstructured, error) {
		return lib.get(ctx, lib.want[0], ns)
	}
	t.Run("a new team label moves the binding to the new group", func(t *testing.T) {
		billing := "billing"
		relabel(t, &billing)
		poll(t, "the binding's subject to be billing", func(ctx context.Context) (bool, error) {
			rb, err := binding(ctx)
			if rb == nil || err != nil {
				return false, err
			}
			subjects, _, _ := unstructured.NestedSlice(rb.Object, "subjects")
			return len(subjects) == 1 && subjects[0].(map[string]any)["name"] == "billing", nil
		})
	})
	t.Run("a Namespace whose team label goes loses its binding", func(t *testing.T) {
		relabel(t, nil)
		poll(t, "the binding to be pruned", func(ctx context.Context) (bool, error) {
			rb, err := binding(ctx)
			return rb == nil, err
		})
	})
}

func TestLibraryPodDisruptionBudget(t *testing.T) {
	runLibrary(t, "library-pdb", true)
}

func TestLibraryService(t *testing.T) {
	runLibrary(t, "library-service", false)
}

// library is one library fixture, read, on a running controller.
type library struct {
	t        *testing.T
	scenario string
	apply    *manifest.Applier
	// triggers are the fixture's triggers of the kinds its policy matches;
	// trigger is the one that expected.yaml's objects name.
	triggers []*unstructured.Unstructured
	trigger  *unstructured.Unstructured
	want     []*unstructured.Unstructured
	markers  int
}

// runLibrary runs the scenario's policy twice, with generateExisting off
// and on, against triggers made before and after it, and checks what each
// gets and what synchronize does to what they got. It returns the
// scenario with both policies still running, for checks of its own.
func runLibrary(t *testing.T, scenario string, synchronize bool, edit ...func(*reconcile.Options)) *library {
	t.Helper()
	runController(t, func(o *reconcile.Options) {
		for _, e := range edit {
			e(o)
		}
	})
	lib := loadLibrary(t, scenario)
	off, on := lib.policy("gex-off"), lib.policy("gex-on")

	oldOff := lib.place(t, off, "old-off")
	oldOn := lib.place(t, on, "old-on")
	// Existing means older than the policy, to the second creation
	// timestamps carry: a trigger of the policy's second counts as new.
	waitForNextSecond(t, oldOn.GetCreationTimestamp().Time)
	lib.applyPolicy(off, false)
	lib.applyPolicy(on, true)

	t.Run("generateExisting on: an existing trigger gets its objects", func(t *testing.T) {
		lib.waitGenerated(t, on, "old-on", oldOn)
	})
	newOff := lib.place(t, off, "new-off")
	t.Run("a trigger created after the policy gets its objects", func(t *testing.T) {
		lib.waitGenerated(t, off, "new-off", newOff)
	})
	t.Run("generateExisting off: an existing trigger gets nothing", func(t *testing.T) {
		// The policy has generated for new-off, so it has synced with
		// old-off, older, in its cache.
		lib.wantNone(t, "old-off", oldOff)
	})
	newOn := lib.place(t, on, "new-on")
	t.Run("generateExisting on: a new trigger gets its objects too", func(t *testing.T) {
		lib.waitGenerated(t, on, "new-on", newOn)
	})

	victim := lib.want[0]
	if synchronize {
		t.Run("synchronize: a deleted object comes back", func(t *testing.T) {
			first := lib.mustGet(t, victim, lib.ns("new-on"))
			lib.delete(t, victim, lib.ns("new-on"))
			poll(t, "the object to come back", func(ctx context.Context) (bool, error) {
				got, err := lib.get(ctx, victim, lib.ns("new-on"))
				return got != nil && got.GetUID() != first.GetUID(), err
			})
		})
	} else {
		t.Run("no synchronize: a deleted object stays deleted", func(t *testing.T) {
			lib.delete(t, victim, lib.ns("new-on"))
			lib.settle(t, on)
			if got, err := lib.get(context.Background(), victim, lib.ns("new-on")); err != nil || got != nil {
				t.Errorf("%s %s came back (err %v)", victim.GetKind(), victim.GetName(), err)
			}
		})
	}
	if newOff.GetNamespace() != "" {
		// A Namespace is never deleted on a control plane without a
		// namespace controller: only namespaced triggers are.
		t.Run("a deleted trigger's objects", func(t *testing.T) {
			r, err := lib.apply.Resource(newOff)
			if err != nil {
				t.Fatal(err)
			}
			if err := r.Delete(context.Background(), newOff.GetName(), metav1.DeleteOptions{}); err != nil {
				t.Fatal(err)
			}
			if synchronize {
				poll(t, "the objects to go with their trigger", func(ctx context.Context) (bool, error) {
					return lib.noneIn(ctx, "new-off")
				})
				return
			}
			lib.settle(t, off)
			lib.waitGenerated(t, off, "new-off", newOff)
		})
	}
	return lib
}

func loadLibrary(t *testing.T, scenario string) *library {
	t.Helper()
	lib := &library{t: t, scenario: scenario}
	var err error
	if lib.apply, err = manifest.NewApplier(cfg); err != nil {
		t.Fatal(err)
	}
	if lib.want, err = fixtures.Objects(scenario, "expected.yaml"); err != nil {
		t.Fatal(err)
	}
	triggers, err := fixtures.Objects(scenario, "triggers.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if len(lib.want) == 0 {
		t.Fatalf("%s/expected.yaml holds no object", scenario)
	}
	labels := lib.want[0].GetLabels()
	kind := labels[sproutv1alpha1.LabelTriggerKind]
	for _, o := range triggers {
		if o.GetKind() != kind {
			continue // the Namespace of namespaced triggers
		}
		lib.triggers = append(lib.triggers, o)
		if o.GetName() == labels[sproutv1alpha1.LabelTriggerName] && o.GetNamespace() == labels[sproutv1alpha1.LabelTriggerNamespace] {
			lib.trigger = o
		}
	}
	if lib.trigger == nil {
		t.Fatalf("%s/triggers.yaml has no %s %s/%s, which expected.yaml names", scenario, kind,
			labels[sproutv1alpha1.LabelTriggerNamespace], labels[sproutv1alpha1.LabelTriggerName])
	}
	return lib
}

// policy names the scenario's policy run as variant.
func (lib *library) policy(variant string) string { return lib.scenario + "-" + variant }

// ns names the Namespace a trigger of the given role is, or lives in.
func (lib *library) ns(role string) string { return lib.scenario + "-" + role }

// applyPolicy applies the scenario's policy as name, selecting only the
// triggers labelled for it, with generateExisting set to existing.
func (lib *library) applyPolicy(name string, existing bool) {
	lib.t.Helper()
	applyFixture(lib.t, lib.scenario, "policy.yaml", func(u *unstructured.Unstructured) {
		u.SetName(name)
		if err := unstructured.SetNestedField(u.Object, existing, "spec", "evaluation", "generateExisting", "enabled"); err != nil {
			lib.t.Fatal(err)
		}
		if err := unstructured.SetNestedField(u.Object, name, "spec", "matchConstraints", "objectSelector", "matchLabels", libraryLabel); err != nil {
			lib.t.Fatal(err)
		}
	})
}

// place creates the fixture's triggers for policy: for a Namespace
// trigger, the generating one renamed to the Namespace of role; for
// namespaced ones, all of them in that Namespace, which it creates. It
// returns the generating trigger as created.
func (lib *library) place(t *testing.T, policy, role string) *unstructured.Unstructured {
	t.Helper()
	ns := lib.ns(role)
	namespaced := lib.trigger.GetNamespace() != ""
	if namespaced {
		createNamespaceOnce(t, ns)
	}
	var made *unstructured.Unstructured
	for _, o := range lib.triggers {
		if !namespaced && o != lib.trigger {
			continue // another Namespace: a system one, or one of no team
		}
		generating := o == lib.trigger
		o = o.DeepCopy()
		if namespaced {
			o.SetNamespace(ns)
		} else {
			o.SetName(ns)
		}
		labels := o.GetLabels()
		if labels == nil {
			labels = map[string]string{}
		}
		labels[libraryLabel] = policy
		o.SetLabels(labels)
		r, err := lib.apply.Resource(o)
		if err != nil {
			t.Fatal(err)
		}
		created, err := r.Create(context.Background(), o, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if generating {
			made = created
		}
	}
	return made
}

// createNamespaceOnce creates a Namespace unless it exists.
func createNamespaceOnce(t *testing.T, name string) {
	t.Helper()
	_, err := kubernetes.NewForConfigOrDie(cfg).CoreV1().Namespaces().Create(context.Background(),
		&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}, metav1.CreateOptions{})
	if err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
}

// get returns want's object in ns as the cluster has it, nil if absent.
func (lib *library) get(ctx context.Context, want *unstructured.Unstructured, ns string) (*unstructured.Unstructured, error) {
	w := want.DeepCopy()
	w.SetNamespace(ns)
	r, err := lib.apply.Resource(w)
	if err != nil {
		return nil, err
	}
	got, err := r.Get(ctx, w.GetName(), metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return nil, nil
	}
	return got, err
}

func (lib *library) mustGet(t *testing.T, want *unstructured.Unstructured, ns string) *unstructured.Unstructured {
	t.Helper()
	got, err := lib.get(context.Background(), want, ns)
	if err != nil || got == nil {
		t.Fatalf("%s %s/%s: %v (found %v)", want.GetKind(), ns, want.GetName(), err, got != nil)
	}
	return got
}

func (lib *library) delete(t *testing.T, want *unstructured.Unstructured, ns string) {
	t.Helper()
	w := want.DeepCopy()
	w.SetNamespace(ns)
	r, err := lib.apply.Resource(w)
	if err != nil {
		t.Fatal(err)
	}
	if err := r.Delete(context.Background(), w.GetName(), metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
}

// waitGenerated waits until every object of expected.yaml exists in the
// Namespace of role, generated by policy for trigger, with every field
// expected.yaml gives it besides its metadata (the server adds its own).
func (lib *library) waitGenerated(t *testing.T, policy, role string, trigger *unstructured.Unstructured) {
	t.Helper()
	ns := lib.ns(role)
	var why string
	err := wait.PollUntilContextTimeout(context.Background(), 50*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
		for _, w := range lib.want {
			got, err := lib.get(ctx, w, ns)
			if err != nil {
				return false, err
			}
			if why = generatedFrom(w, got, policy, trigger); why != "" {
				return false, nil
			}
		}
		n, err := lib.countGenerated(ctx, ns, policy)
		if n != len(lib.want) {
			why = fmt.Sprintf("%s generated %d objects, want %d", policy, n, len(lib.want))
		}
		return err == nil && n == len(lib.want), err
	})
	if err != nil {
		t.Fatalf("waiting for %s's objects in %s: %v: %s", policy, ns, err, why)
	}
}

// generatedFrom says how got is not want generated by policy for trigger,
// or "" when it is.
func generatedFrom(want, got *unstructured.Unstructured, policy string, trigger *unstructured.Unstructured) string {
	id := want.GetKind() + " " + want.GetName()
	if got == nil {
		return id + " does not exist"
	}
	labels := got.GetLabels()
	if labels[sproutv1alpha1.LabelPolicyName] != policy || labels[sproutv1alpha1.LabelTriggerUID] != string(trigger.GetUID()) {
		return fmt.Sprintf("%s has the labels %v, want policy %s and trigger %s", id, labels, policy, trigger.GetUID())
	}
	for k, v := range want.Object {
		if k == "metadata" {
			continue
		}
		if path := notHeldIn(v, got.Object[k], k); path != "" {
			return fmt.Sprintf("%s differs at %s", id, path)
		}
	}
	return ""
}

// notHeldIn returns the first path of want that got does not hold equal.
func notHeldIn(want, got any, path string) string {
	switch w := want.(type) {
	case map[string]any:
		g, ok := got.(map[string]any)
		if !ok {
			return path
		}
		for k, v := range w {
			if p := notHeldIn(v, g[k], path+"."+k); p != "" {
				return p
			}
		}
		return ""
	case []any:
		g, ok := got.([]any)
		if !ok || len(g) != len(w) {
			return path
		}
		for i := range w {
			if p := notHeldIn(w[i], g[i], fmt.Sprintf("%s[%d]", path, i)); p != "" {
				return p
			}
		}
		return ""
	default:
		if fmt.Sprint(want) != fmt.Sprint(got) {
			return path
		}
		return ""
	}
}

// wantNone fails unless the Namespace of role holds none of expected.yaml's
// objects.
func (lib *library) wantNone(t *testing.T, role string, trigger *unstructured.Unstructured) {
	t.Helper()
	none, err := lib.noneIn(context.Background(), role)
	if err != nil {
		t.Fatal(err)
	}
	if !none {
		t.Errorf("%s %s got objects", trigger.GetKind(), trigger.GetName())
	}
}

// countGenerated counts the objects policy generated in ns, of the kinds
// of expected.yaml.
func (lib *library) countGenerated(ctx context.Context, ns, policy string) (int, error) {
	n := 0
	for _, w := range lib.kinds() {
		w.SetNamespace(ns)
		r, err := lib.apply.Resource(w)
		if err != nil {
			return 0, err
		}
		list, err := r.List(ctx, metav1.ListOptions{LabelSelector: sproutv1alpha1.LabelPolicyName + "=" + policy})
		if err != nil {
			return 0, err
		}
		n += len(list.Items)
	}
	return n, nil
}

// kinds returns one object of expected.yaml of each kind it holds.
func (lib *library) kinds() []*unstructured.Unstructured {
	var out []*unstructured.Unstructured
	for _, w := range lib.want {
		if !slices.ContainsFunc(out, func(o *unstructured.Unstructured) bool { return o.GetKind() == w.GetKind() }) {
			out = append(out, w.DeepCopy())
		}
	}
	return out
}

// noneIn reports whether the Namespace of role holds no object Sprout
// generated of the kinds of expected.yaml.
func (lib *library) noneIn(ctx context.Context, role string) (bool, error) {
	ns := lib.ns(role)
	for _, w := range lib.kinds() {
		w.SetNamespace(ns)
		r, err := lib.apply.Resource(w)
		if err != nil {
			return false, err
		}
		list, err := r.List(ctx, metav1.ListOptions{LabelSelector: sproutv1alpha1.LabelManagedBy + "=" + sproutv1alpha1.ManagedBy})
		if err != nil || len(list.Items) > 0 {
			return false, err
		}
	}
	return true, nil
}

// settle places a marker trigger for policy and waits for its objects:
// once they exist, the policy has synced after everything done before,
// so an absence checked afterwards is a real absence.
func (lib *library) settle(t *testing.T, policy string) {
	t.Helper()
	lib.markers++
	role := fmt.Sprintf("marker-%d", lib.markers)
	marker := lib.place(t, policy, role)
	lib.waitGenerated(t, policy, role, marker)
}
