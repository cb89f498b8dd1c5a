package reconcile_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	typedcorev1 "k8s.io/client-go/kubernetes/typed/core/v1"
	"k8s.io/client-go/rest"

	sproutv1alpha1 "github.com/sprout-gitops/sprout/api/sprout/v1alpha1"
	"github.com/sprout-gitops/sprout/reconcile"
	"github.com/sprout-gitops/sprout/reconcile/ledger"
	"github.com/sprout-gitops/sprout/sources"
)

// stamper is a ServiceAccount of ns that may read, create and patch
// ConfigMaps there, but not delete them: its ConfigMaps client, acting as
// the account (impersonated), with RBAC on.
func stamper(t *testing.T, tb *table) typedcorev1.ConfigMapInterface {
	t.Helper()
	ctx := context.Background()
	if _, err := tb.kube.CoreV1().ServiceAccounts(tb.ns).Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "stamper"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	grant(t, tb.kube, tb.ns, "stamper", []string{"get", "list", "watch", "create", "patch"}, "configmaps")
	as := rest.CopyConfig(cfg)
	as.Impersonate = rest.ImpersonationConfig{UserName: "system:serviceaccount:" + tb.ns + ":stamper"}
	return kubernetes.NewForConfigOrDie(as).CoreV1().ConfigMaps(tb.ns)
}

// copier is how a stamper writes the origin of one of a policy's objects
// onto ConfigMaps of its own, and how a failure names what it wrote.
type copier struct {
	write  func(t *testing.T, cms typedcorev1.ConfigMapInterface, name string, from *corev1.ConfigMap, trigger types.UID)
	copied string // what a written ConfigMap is, after its name
	what   string // what was written onto it
	mine   string // a written ConfigMap
}

var (
	stamping = copier{stamp, "stamped with the policy's origin", "the copied labels", "the stamped ConfigMap"}
	forging  = copier{forge, "forged as the policy's by its managed fields", "the forged managed fields", "the forged ConfigMap"}
)

// ownWithOrigin has the stamper create its own ConfigMap name, and returns
// the labels and annotations that name the origin of from, one of the
// policy's objects, with trigger (when not empty) for its trigger's UID.
func ownWithOrigin(t *testing.T, cms typedcorev1.ConfigMapInterface, name string, from *corev1.ConfigMap, trigger types.UID) (labels, annotations map[string]string) {
	t.Helper()
	own := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: name}, Data: map[string]string{"mine": "yes"}}
	if _, err := cms.Create(context.Background(), own, metav1.CreateOptions{FieldManager: "stamper"}); err != nil {
		t.Fatal(err)
	}
	labels = map[string]string{}
	for k, v := range from.Labels {
		labels[k] = v
	}
	if trigger != "" {
		labels[sproutv1alpha1.LabelTriggerUID] = string(trigger)
	}
	return labels, map[string]string{sproutv1alpha1.AnnotationPolicy: from.Annotations[sproutv1alpha1.AnnotationPolicy]}
}

// stamp writes the origin of from onto the stamper's own ConfigMap name
// (see ownWithOrigin) with a merge patch, under the stamper's name.
func stamp(t *testing.T, cms typedcorev1.ConfigMapInterface, name string, from *corev1.ConfigMap, trigger types.UID) {
	t.Helper()
	labels, annotations := ownWithOrigin(t, cms, name, from, trigger)
	patch, err := json.Marshal(map[string]any{"metadata": map[string]any{"labels": labels, "annotations": annotations}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := cms.Patch(context.Background(), name, types.MergePatchType, patch, metav1.PatchOptions{FieldManager: "stamper"}); err != nil {
		t.Fatal(err)
	}
}

// activated is the beginning the record of the GeneratingPolicy name holds.
func activated(t *testing.T, name string) time.Time {
	t.Helper()
	s, _, _ := unstructured.NestedString(policyRecord(t, name).Object, "spec", "activated")
	at, err := time.Parse(time.RFC3339, s)
	if err != nil {
		t.Fatalf("spec.activated %q: %v", s, err)
	}
	return at
}

// restartRebuilding runs a controller, with options changed by edit, whose
// policy name from files has lost its record, and returns in a second
// after the record written again says the policy began again: a trigger
// created from then on is newer than the policy, however slowly the
// controller started.
func restartRebuilding(t *testing.T, edit func(*reconcile.Options), name string) {
	t.Helper()
	runController(t, edit)
	poll(t, "the record written again, rebuilding", func(ctx context.Context) (bool, error) {
		rec, err := dynamic.NewForConfigOrDie(cfg).Resource(sproutv1alpha1.PolicyInventories).Get(ctx, "gpol."+name, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return false, nil
		}
		return err == nil && rec.GetLabels()[ledger.LabelRebuilding] != "", err
	})
	again := activated(t, name)
	poll(t, "a second after the policy began again", func(context.Context) (bool, error) {
		return time.Now().Truncate(time.Second).After(again), nil
	})
}

// copiesOutliveAPrune: a synchronizing policy name, triggered by ConfigMaps
// labelled app in a table of that name, generates for two triggers; the
// stamper writes their objects' origin onto two ConfigMaps of its own, as
// c does. The policy then prunes, for a trigger deleted and for a trigger
// that no longer matches: its own objects go, the stamper's stay.
func copiesOutliveAPrune(t *testing.T, app, name string, c copier) {
	t.Helper()
	startController(t)
	tb := newTable(t, app)
	ctx := context.Background()
	cms := stamper(t, tb)
	tb.applyPolicy(derivedPolicy(name, app, "out", "one", true, false))
	t.Cleanup(func() { tb.deletePolicy(name) })
	tb.trigger("a", app, "a1")
	tb.trigger("b", app, "b1")
	aOut := tb.waitFor("the policy's object for a", "a-out", exists)
	bOut := tb.waitFor("the policy's object for b", "b-out", exists)

	c.write(t, cms, "mine-a", aOut, "")
	c.write(t, cms, "mine-b", bOut, "")
	if err := cms.Delete(ctx, "mine-a", metav1.DeleteOptions{}); !apierrors.IsForbidden(err) {
		t.Fatalf("the stamper deleting its own ConfigMap: %v, want Forbidden", err)
	}

	tb.delete("a") // its objects go
	b := tb.get("b")
	b.Labels["app"] = "elsewhere" // no longer matching: its objects go
	if _, err := tb.kube.CoreV1().ConfigMaps(tb.ns).Update(ctx, b, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	tb.waitFor("the object of the deleted trigger to be pruned", "a-out", absent)
	tb.waitFor("the object of the trigger no longer matching to be pruned", "b-out", absent)
	tb.settle(app, 1) // a sync after both prunes
	for _, mine := range []string{"mine-a", "mine-b"} {
		if cm := tb.get(mine); cm == nil || cm.Data["mine"] != "yes" {
			t.Errorf("%s, %s, was pruned or written over: %v", mine, c.copied, cm)
		}
	}
}

// copiesAdmitNothingToARebuild: a synchronizing policy name from a folder,
// triggered by ConfigMaps labelled app in a table of that name, loses its
// record while Sprout is stopped, and the stamper writes, as c does, the
// policy's origin for a trigger the policy never admitted onto a ConfigMap
// of its own. The record is rebuilt from the objects Sprout signed alone:
// the copy admits nothing, and does not move the policy's beginning back.
func copiesAdmitNothingToARebuild(t *testing.T, app, name string, c copier) {
	t.Helper()
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "p.yaml"), []byte(derivedPolicy(name, app, "out", "one", true, false)), 0o644); err != nil {
		t.Fatal(err)
	}
	fromDir := func(o *reconcile.Options) {
		o.Sources = []sources.Source{sources.NewDirectory(dir, 100*time.Millisecond)}
	}
	policy := "GeneratingPolicy/" + name
	tb := newTable(t, app)
	cms := stamper(t, tb)
	tb.trigger("old", app, "o1") // before the policy begins: never admitted
	old := tb.get("old")
	poll(t, "a second after the old trigger", func(context.Context) (bool, error) {
		return time.Now().Truncate(time.Second).After(old.CreationTimestamp.Time), nil
	})
	runUntilSyncedWith(t, cfg, fromDir, policy) // the policy begins
	tb.trigger("new", app, "n1")
	runUntilSyncedWith(t, cfg, fromDir, policy)
	newOut := tb.get("new-out")
	if newOut == nil || tb.get("old-out") != nil {
		t.Fatalf("before the loss: new-out %v, old-out generated %v", newOut != nil, tb.get("old-out") != nil)
	}
	began := activated(t, name)

	// While stopped: the record goes, and the copy names the old trigger.
	c.write(t, cms, "mine", newOut, old.UID)
	if err := dynamic.NewForConfigOrDie(cfg).Resource(sproutv1alpha1.PolicyInventories).Delete(context.Background(), "gpol."+name, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}

	// Sprout restarts in a later second than "new": within its second,
	// "new" would count as created after the policy began again.
	created := tb.get("new").CreationTimestamp.Time
	poll(t, "a second after the new trigger", func(context.Context) (bool, error) {
		return time.Now().Truncate(time.Second).After(created), nil
	})
	// A policy from files without its record begins again when Sprout reads
	// it; its objects are looked for in the resources it writes to, which a
	// trigger newer than that names. Until one comes the record stays
	// rebuilding and prunes nothing.
	restartRebuilding(t, fromDir, name)
	tb.trigger("after", app, "a1")
	poll(t, "the record rebuilt", func(ctx context.Context) (bool, error) {
		rec, err := dynamic.NewForConfigOrDie(cfg).Resource(sproutv1alpha1.PolicyInventories).Get(ctx, "gpol."+name, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return false, nil
		}
		return err == nil && rec.GetLabels()[ledger.LabelRebuilding] == "", err
	})
	tb.settle(app, 1) // a sync after the rebuild
	if tb.get("old-out") != nil {
		t.Errorf("%s admitted a trigger the policy never admitted: old-out was generated", c.what)
	}
	if at := activated(t, name); at.Before(began) {
		t.Errorf("the policy's beginning moved back to %v, before it began (%v)", at, began)
	}
	if cm := tb.get("mine"); cm == nil || cm.Data["mine"] != "yes" {
		t.Errorf("%s was pruned or written over: %v", c.mine, cm)
	}
}

// TestCopiedOriginIsNotPruned: a ServiceAccount that may patch ConfigMaps
// but not delete them copies a synchronizing policy's origin labels and
// annotation onto ConfigMaps of its own. The policy then prunes, for a
// trigger deleted and for a trigger that no longer matches: its own
// objects go, the stamped ones stay. Labels copied onto an object never
// make Sprout delete it (a delete by proxy).
func TestCopiedOriginIsNotPruned(t *testing.T) {
	copiesOutliveAPrune(t, "pruneproof", "prune-proof", stamping)
}

// TestLostRecordIsNotRebuiltFromCopiedLabels: a policy from a folder loses
// its record while Sprout is stopped, and a ServiceAccount stamps, on a
// ConfigMap of its own, the policy's origin for a trigger the policy never
// admitted (created before the policy began). The record is rebuilt from
// the objects Sprout wrote alone: the copy admits nothing, and does not
// move the policy's beginning back.
func TestLostRecordIsNotRebuiltFromCopiedLabels(t *testing.T) {
	copiesAdmitNothingToARebuild(t, "rebuildproof", "rebuild-proof", stamping)
}

// forge writes the origin of from onto the stamper's own ConfigMap name
// (see ownWithOrigin) as Sprout writes it: a server-side apply under
// Sprout's field manager, so that the managed fields say Sprout wrote the
// origin. Only the proof it cannot write tells it apart.
func forge(t *testing.T, cms typedcorev1.ConfigMapInterface, name string, from *corev1.ConfigMap, trigger types.UID) {
	t.Helper()
	labels, annotations := ownWithOrigin(t, cms, name, from, trigger)
	patch, err := json.Marshal(map[string]any{"apiVersion": "v1", "kind": "ConfigMap",
		"metadata": map[string]any{"name": name, "labels": labels, "annotations": annotations}})
	if err != nil {
		t.Fatal(err)
	}
	forged, err := cms.Patch(context.Background(), name, types.ApplyPatchType, patch, metav1.PatchOptions{FieldManager: sproutv1alpha1.FieldManager, Force: new(true)})
	if err != nil {
		t.Fatal(err)
	}
	if !slices.ContainsFunc(forged.ManagedFields, func(e metav1.ManagedFieldsEntry) bool { return e.Manager == sproutv1alpha1.FieldManager }) {
		t.Fatalf("the forged ConfigMap's managed fields name no %s: %v", sproutv1alpha1.FieldManager, forged.ManagedFields)
	}
}

// TestForgedManagedFieldsAreNotPruned: a ServiceAccount that may patch
// ConfigMaps but not delete them writes a synchronizing policy's origin
// onto ConfigMaps of its own with a server-side apply under Sprout's own
// field manager. The policy then prunes, for a trigger deleted and for a
// trigger that no longer matches: its own objects go, the forged ones
// stay. Managed fields are evidence, not a signature: pruning takes the
// proof Sprout signed.
func TestForgedManagedFieldsAreNotPruned(t *testing.T) {
	copiesOutliveAPrune(t, "forgedprune", "forged-prune", forging)
}

// TestLostRecordIsNotRebuiltFromForgedManagedFields: a policy from a
// folder loses its record while Sprout is stopped, and a ServiceAccount
// writes, on a ConfigMap of its own and under Sprout's field manager, the
// policy's origin for a trigger the policy never admitted. The record is
// rebuilt from the objects Sprout signed alone: the forgery admits
// nothing, and does not move the policy's beginning back.
func TestLostRecordIsNotRebuiltFromForgedManagedFields(t *testing.T) {
	copiesAdmitNothingToARebuild(t, "forgedrebuild", "forged-rebuild", forging)
}

// TestForgedManagedFieldsDoNotExemptATrigger: a tenant creates their
// trigger carrying the origin of another policy's object, written under
// Sprout's own field manager, so that its managed fields say Sprout wrote
// it. A policy that skips background requests (Kyverno's default) still
// generates for it: only a signed proof tells what Sprout generated.
func TestForgedManagedFieldsDoNotExemptATrigger(t *testing.T) {
	startController(t)
	tb := newTable(t, "forgedskip")
	tb.applyPolicy(derivedPolicy("forged-skip", "forgedskip", "out", "one", true, false))
	t.Cleanup(func() { tb.deletePolicy("forged-skip") })
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "mine", Namespace: tb.ns,
		Labels: map[string]string{"app": "forgedskip", sproutv1alpha1.LabelManagedBy: sproutv1alpha1.ManagedBy,
			sproutv1alpha1.LabelPolicyName: "other", sproutv1alpha1.LabelTriggerUID: "t1"},
		Annotations: map[string]string{sproutv1alpha1.AnnotationPolicy: "GeneratingPolicy/other"},
	}, Data: map[string]string{"value": "v"}}
	created, err := tb.kube.CoreV1().ConfigMaps(tb.ns).Create(context.Background(), cm, metav1.CreateOptions{FieldManager: sproutv1alpha1.FieldManager})
	if err != nil {
		t.Fatal(err)
	}
	if !slices.ContainsFunc(created.ManagedFields, func(e metav1.ManagedFieldsEntry) bool { return e.Manager == sproutv1alpha1.FieldManager }) {
		t.Fatalf("the forged trigger's managed fields name no %s: %v", sproutv1alpha1.FieldManager, created.ManagedFields)
	}
	tb.waitFor("the forged trigger's object", "mine-out", exists)
}

// TestObjectsWrittenBeforeProofsAreSignedThenPruned: an object a
// synchronizing policy wrote before Sprout signed its objects carries no
// proof. The policy's next apply, at the start, signs it; from then on it
// is pruned as the policy's when its trigger goes.
func TestObjectsWrittenBeforeProofsAreSignedThenPruned(t *testing.T) {
	const proof = "sprout.dev/proof"
	tb := newTable(t, "unsigned")
	tb.applyPolicy(derivedPolicy("unsigned", "unsigned", "out", "one", true, false))
	t.Cleanup(func() { tb.deletePolicy("unsigned") })
	tb.trigger("a", "unsigned", "a1")
	runUntilSynced(t, cfg, "GeneratingPolicy/unsigned")

	// While stopped: a-out as Sprout wrote it before proofs.
	patch := fmt.Sprintf(`{"metadata":{"annotations":{%q:null}}}`, proof)
	unsigned, err := tb.kube.CoreV1().ConfigMaps(tb.ns).Patch(context.Background(), "a-out", types.MergePatchType, []byte(patch),
		metav1.PatchOptions{FieldManager: sproutv1alpha1.FieldManager})
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := unsigned.Annotations[proof]; ok {
		t.Fatalf("a-out still carries a proof: %v", unsigned.Annotations)
	}

	startController(t)
	tb.waitFor("a-out signed by the policy's apply at the start", "a-out", func(cm *corev1.ConfigMap) bool {
		return cm != nil && cm.Annotations[proof] != ""
	})
	tb.delete("a")
	tb.waitFor("a-out, signed, pruned with its trigger", "a-out", absent)
}
