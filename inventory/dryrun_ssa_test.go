package inventory

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/wI2L/jsondiff"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/yaml"
)

// decode reads one object from YAML.
func decode(t *testing.T, doc string) *unstructured.Unstructured {
	t.Helper()
	obj := &unstructured.Unstructured{}
	if err := yaml.Unmarshal([]byte(doc), &obj.Object); err != nil {
		t.Fatal(err)
	}
	return obj
}

const (
	defaultsDeployment = `apiVersion: apps/v1
kind: Deployment
metadata: {name: web, namespace: dryrun-defaults}
spec:
  replicas: 2
  selector: {matchLabels: {app: web}}
  template:
    metadata: {labels: {app: web}}
    spec:
      containers:
      - name: web
        image: nginx
        ports: [{containerPort: 8080, name: http}]
`
	defaultsService = `apiVersion: v1
kind: Service
metadata: {name: web-svc, namespace: dryrun-defaults}
spec:
  selector: {app: web}
  ports: [{name: http, port: 80, targetPort: http}, {name: metrics, port: 9090, targetPort: 9090}]
`
)

// TestDryRunFindsNoDriftInDefaults: objects the API server fills in (a
// Deployment and a Service whose ports have no protocol, a named and a
// numbered target port, a Secret written as stringData) are unchanged in
// a dry run of what was applied; a change shows as that change alone in
// the patch; an object to create is shown as the API server would create
// it, defaults included.
func TestDryRunFindsNoDriftInDefaults(t *testing.T) {
	ctx := context.Background()
	a, _, c := countingApplier(t)
	namespace(t, c, "dryrun-defaults")
	secret := decode(t, `{apiVersion: v1, kind: Secret, metadata: {name: creds, namespace: dryrun-defaults}, stringData: {password: hunter2}}`)
	desired := []*unstructured.Unstructured{decode(t, defaultsDeployment), decode(t, defaultsService), secret}
	copies := func() []*unstructured.Unstructured {
		out := make([]*unstructured.Unstructured, len(desired))
		for i, o := range desired {
			out[i] = o.DeepCopy()
		}
		return out
	}
	// Applied, as Sprout applies an object after its create's fields were
	// handed over.
	for _, o := range copies() {
		Stamp(o)
		if _, err := a.serverApply(ctx, o); err != nil {
			t.Fatal(err)
		}
	}
	live := cachedObjects{}
	for _, o := range desired {
		one, _ := cached(t, c, o)
		live[o.GetName()] = one[o.GetName()]
	}

	cs, err := a.DryRun().Apply(ctx, copies(), live, ApplyOptions{Synchronize: true})
	if err != nil {
		t.Fatal(err)
	}
	for _, ch := range cs.Changes {
		if ch.Action != Unchanged {
			t.Errorf("%s as applied: %s, want unchanged; before and after:\n%s\n%s", ch.ID, ch.Action, show(t, ch.Before), show(t, ch.After))
		}
	}

	changed := decode(t, strings.Replace(defaultsDeployment, "replicas: 2", "replicas: 3", 1))
	cs, err = a.DryRun().Apply(ctx, []*unstructured.Unstructured{changed}, live, ApplyOptions{Synchronize: true})
	if err != nil || len(cs.Changes) != 1 || cs.Changes[0].Action != Configured {
		t.Fatalf("a changed Deployment: %v %+v", err, cs.Changes)
	}
	patch, err := drift(cs.Changes[0].Before, cs.Changes[0].After)
	if err != nil {
		t.Fatal(err)
	}
	if got := ops(withoutDigest(patch)); got != `{"value":3,"op":"replace","path":"/spec/replicas"}` {
		t.Errorf("a changed Deployment's patch: %s, want spec.replicas alone", got)
	}

	absent := decode(t, strings.Replace(defaultsDeployment, "name: web,", "name: api,", 1))
	cs, err = a.DryRun().Apply(ctx, []*unstructured.Unstructured{absent}, live, ApplyOptions{Synchronize: true})
	if err != nil || len(cs.Changes) != 1 || cs.Changes[0].Action != Created {
		t.Fatalf("an absent Deployment: %v %+v", err, cs.Changes)
	}
	after := cs.Changes[0].After
	if policy, _, _ := unstructured.NestedString(after.Object, "spec", "strategy", "type"); policy != "RollingUpdate" {
		t.Errorf("an absent Deployment, shown as created: strategy %q, want the API server's default RollingUpdate:\n%s", policy, show(t, after))
	}
	if after.GetUID() != "" || after.GetManagedFields() != nil {
		t.Errorf("an absent Deployment, shown as created, carries the server's bookkeeping:\n%s", show(t, after))
	}
}

// withoutDigest drops from patch the change of Sprout's digest of what it
// applied, which every change brings.
func withoutDigest(patch jsondiff.Patch) jsondiff.Patch {
	var out jsondiff.Patch
	for _, op := range patch {
		if !strings.HasPrefix(op.Path, "/metadata/annotations") {
			out = append(out, op)
		}
	}
	return out
}

func ops(patch jsondiff.Patch) string { return patch.String() }

func show(t *testing.T, obj *unstructured.Unstructured) string {
	t.Helper()
	if obj == nil {
		return "<nil>"
	}
	out, err := yaml.Marshal(obj.Object)
	if err != nil {
		t.Fatal(err)
	}
	return string(out)
}

// TestDryRunMasksSecretsAsFlux: a Secret's values never show in a dry run,
// whether it would be created (values as "***"), configured (a changed
// value as "*** (before)" and "*** (after)", in the objects and in their
// patch) or deleted.
func TestDryRunMasksSecretsAsFlux(t *testing.T) {
	ctx := context.Background()
	a, _, c := countingApplier(t)
	namespace(t, c, "dryrun-mask")
	doc := `{apiVersion: v1, kind: Secret, metadata: {name: creds, namespace: dryrun-mask}, stringData: {user: admin, password: PASSWORD}}`
	old := decode(t, strings.Replace(doc, "PASSWORD", "old-password", 1))
	cs, err := a.DryRun().Apply(ctx, []*unstructured.Unstructured{old.DeepCopy()}, cachedObjects{}, ApplyOptions{Synchronize: true})
	if err != nil || len(cs.Changes) != 1 || cs.Changes[0].Action != Created {
		t.Fatalf("a Secret to create: %v %+v", err, cs.Changes)
	}
	created := cs.Changes[0]
	if data, _, _ := unstructured.NestedStringMap(created.After.Object, "data"); data["user"] != "***" || data["password"] != "***" {
		t.Errorf("a Secret to create: data %v, want every value ***", data)
	}

	if _, err := a.serverApply(ctx, old.DeepCopy()); err != nil {
		t.Fatal(err)
	}
	live, full := cached(t, c, old)
	cs, err = a.DryRun().Apply(ctx, []*unstructured.Unstructured{decode(t, strings.Replace(doc, "PASSWORD", "new-password", 1))}, live, ApplyOptions{Synchronize: true})
	if err != nil || len(cs.Changes) != 1 || cs.Changes[0].Action != Configured {
		t.Fatalf("a changed Secret: %v %+v", err, cs.Changes)
	}
	configured := cs.Changes[0]
	patch, err := drift(configured.Before, configured.After)
	if err != nil {
		t.Fatal(err)
	}
	if got := ops(withoutDigest(patch)); got != `{"value":"*** (after)","op":"replace","path":"/data/password"}` {
		t.Errorf("a changed Secret's patch: %s, want the password's masks alone", got)
	}

	deleted, err := a.DryRun().Prune(ctx, []*unstructured.Unstructured{full})
	if err != nil || len(deleted.Changes) != 1 {
		t.Fatalf("a Secret to delete: %v %+v", err, deleted.Changes)
	}
	if data, _, _ := unstructured.NestedStringMap(deleted.Changes[0].Before.Object, "data"); data["user"] != "***" || data["password"] != "***" {
		t.Errorf("a Secret to delete: data %v, want every value ***", data)
	}

	out, err := json.Marshal([]any{created, configured, deleted.Changes[0], patch})
	if err != nil {
		t.Fatal(err)
	}
	for _, secret := range []string{"admin", "old-password", "new-password", b64("admin"), b64("old-password"), b64("new-password"), "stringData"} {
		if strings.Contains(string(out), secret) {
			t.Errorf("the dry run shows %q:\n%s", secret, out)
		}
	}
}
