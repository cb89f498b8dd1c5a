package inventory

import (
	"context"
	"encoding/base64"
	"reflect"
	"strings"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"
)

// TestDryRunTellsWhatAnApplyWouldDo: a dry run writes nothing, and tells
// of an absent object that it would be created, of one the API server would
// change that it would be configured (both states shown, a Secret's values
// masked, the server's bookkeeping left out), and of one whose cached copy
// is stale but which already is as desired that it is unchanged.
func TestDryRunTellsWhatAnApplyWouldDo(t *testing.T) {
	ctx := context.Background()
	a, _, c := countingApplier(t)
	namespace(t, c, "dryrun")

	secret := generated("dryrun", "creds", nil)
	secret.SetKind("Secret")
	delete(secret.Object, "data")
	secret.Object["stringData"] = map[string]any{"user": "admin", "password": "old-password"}
	cm := generated("dryrun", "zk", map[string]any{"a": "1"})
	if cs, err := a.Apply(ctx, []*unstructured.Unstructured{secret.DeepCopy(), cm.DeepCopy()}, cachedObjects{}, ApplyOptions{Synchronize: true}); err != nil || cs.Count(Created) != 2 {
		t.Fatalf("create: %v %+v", err, cs.Changes)
	}
	liveSecret, fullSecret := cached(t, c, secret)
	staleCM, _ := cached(t, c, cm)
	cm = generated("dryrun", "zk", map[string]any{"a": "2"})
	if cs, err := a.Apply(ctx, []*unstructured.Unstructured{cm.DeepCopy()}, staleCM, ApplyOptions{Synchronize: true}); err != nil || cs.Count(Configured) != 1 {
		t.Fatalf("configure: %v %+v", err, cs.Changes)
	}
	_, fullCM := cached(t, c, cm)

	secret.Object["stringData"] = map[string]any{"user": "admin", "password": "new-password"}
	absent := generated("dryrun", "new", map[string]any{"b": "1"})
	live := cachedObjects{"creds": liveSecret["creds"], "zk": staleCM["zk"]}
	cs, err := a.DryRun().Apply(ctx, []*unstructured.Unstructured{secret, cm, absent}, live, ApplyOptions{Synchronize: true})
	if err != nil {
		t.Fatal(err)
	}
	byID := map[string]Change{}
	for _, ch := range cs.Changes {
		byID[ch.ID] = ch
	}

	created := byID["ConfigMap/dryrun/new"]
	if created.Action != Created || created.Before != nil || created.After == nil {
		t.Errorf("an absent object: %+v, want created with only an after", created)
	}
	if ch := byID["ConfigMap/dryrun/zk"]; ch.Action != Unchanged {
		t.Errorf("an object already as desired, its cached copy stale: %+v, want unchanged", ch)
	}

	ch := byID["Secret/dryrun/creds"]
	if ch.Action != Configured || ch.Before == nil || ch.After == nil {
		t.Fatalf("a changed Secret: %+v, want configured with both states", ch)
	}
	for side, obj := range map[string]*unstructured.Unstructured{"before": ch.Before, "after": ch.After} {
		data, _, _ := unstructured.NestedStringMap(obj.Object, "data")
		if want := secretMask + " (" + side + ")"; data["password"] != want || data["user"] != secretMask {
			t.Errorf("the Secret %s: data %v, want password %q and user %q", side, data, want, secretMask)
		}
		out, err := yaml.Marshal(obj.Object)
		if err != nil {
			t.Fatal(err)
		}
		for _, hidden := range []string{"old-password", "new-password", "admin", b64("old-password"), b64("new-password"), b64("admin"), "managedFields", "resourceVersion"} {
			if strings.Contains(string(out), hidden) {
				t.Errorf("the Secret %s shows %q:\n%s", side, hidden, out)
			}
		}
	}

	// Nothing was written.
	for _, was := range []*unstructured.Unstructured{fullSecret, fullCM} {
		_, now := cached(t, c, was)
		if now.GetResourceVersion() != was.GetResourceVersion() {
			t.Errorf("%s was written by a dry run: version %s, was %s", ObjectID(was), now.GetResourceVersion(), was.GetResourceVersion())
		}
	}
	got := &unstructured.Unstructured{}
	got.SetGroupVersionKind(absent.GroupVersionKind())
	if err := c.Get(ctx, client.ObjectKeyFromObject(absent), got); !apierrors.IsNotFound(err) {
		t.Errorf("%s after a dry run: %v, want not found", ObjectID(absent), err)
	}
}

func b64(s string) string { return base64.StdEncoding.EncodeToString([]byte(s)) }

// TestDryRunShowsWhatAHandOverRemoves: for an object Sprout created, whose
// fields its create's entry still holds, a policy that drops a field shows
// the field gone in the dry run, as the sync (hand-over, then apply)
// leaves the object.
func TestDryRunShowsWhatAHandOverRemoves(t *testing.T) {
	ctx := context.Background()
	a, _, c := countingApplier(t)
	namespace(t, c, "dryrun-handoff")
	obj := generated("dryrun-handoff", "zk", map[string]any{"a": "1", "b": "2"})
	obj.SetLabels(map[string]string{"team": "red", "tier": "gold"})
	Label(obj, Origin{Policy: "GeneratingPolicy/handoff", PolicyName: "handoff",
		Trigger: ObjectRef{GVK: schema.GroupVersionKind{Version: "v1", Kind: "Namespace"}, Name: "dryrun-handoff", UID: types.UID("uid-dryrun-handoff")}})
	if cs, err := a.Apply(ctx, []*unstructured.Unstructured{obj.DeepCopy()}, cachedObjects{}, ApplyOptions{Synchronize: true}); err != nil || cs.Count(Created) != 1 {
		t.Fatalf("create: %v %+v", err, cs.Changes)
	}
	live, _ := cached(t, c, obj)

	dropped := generated("dryrun-handoff", "zk", map[string]any{"a": "1"})
	dropped.SetLabels(map[string]string{"team": "red"})
	Label(dropped, Origin{Policy: "GeneratingPolicy/handoff", PolicyName: "handoff",
		Trigger: ObjectRef{GVK: schema.GroupVersionKind{Version: "v1", Kind: "Namespace"}, Name: "dryrun-handoff", UID: types.UID("uid-dryrun-handoff")}})
	cs, err := a.DryRun().Apply(ctx, []*unstructured.Unstructured{dropped.DeepCopy()}, live, ApplyOptions{Synchronize: true})
	if err != nil || len(cs.Changes) != 1 || cs.Changes[0].Action != Configured {
		t.Fatalf("dry run: %v %+v", err, cs.Changes)
	}
	ch := cs.Changes[0]
	if data, _, _ := unstructured.NestedStringMap(ch.Before.Object, "data"); data["b"] != "2" {
		t.Errorf("before: data %v, want b", data)
	}
	if ch.Before.GetLabels()["tier"] != "gold" {
		t.Errorf("before: labels %v, want tier", ch.Before.GetLabels())
	}

	// The sync itself, for what the dry run should have said.
	if cs, err := a.Apply(ctx, []*unstructured.Unstructured{dropped.DeepCopy()}, live, ApplyOptions{Synchronize: true}); err != nil || cs.Count(Configured) != 1 {
		t.Fatalf("apply: %v %+v", err, cs.Changes)
	}
	_, after := cached(t, c, dropped)
	want, _, _ := unstructured.NestedStringMap(after.Object, "data")
	got, _, _ := unstructured.NestedStringMap(ch.After.Object, "data")
	if len(want) != 1 || !reflect.DeepEqual(got, want) {
		t.Errorf("the dry run's data %v, the sync's %v: want both a alone", got, want)
	}
	if !reflect.DeepEqual(ch.After.GetLabels(), after.GetLabels()) || after.GetLabels()["tier"] != "" {
		t.Errorf("the dry run's labels %v, the sync's %v: want both without tier", ch.After.GetLabels(), after.GetLabels())
	}
}
