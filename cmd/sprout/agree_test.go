package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/apiserver/pkg/admission"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/discovery/cached/memory"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/restmapper"

	apiv1 "github.com/sprout-gitops/sprout/api/policies/v1"
	sproutv1alpha1 "github.com/sprout-gitops/sprout/api/sprout/v1alpha1"
	"github.com/sprout-gitops/sprout/cmd/sprout/internal/offline"
	"github.com/sprout-gitops/sprout/fixtures"
	"github.com/sprout-gitops/sprout/internal/manifest"
	"github.com/sprout-gitops/sprout/reconcile"
)

// TestRenderAgreesWithTheController feeds the fixture scenarios to `sprout
// render` and, as CREATE events, to the controller on a real control
// plane, and requires the same objects of both: render, diff and the
// controller decide through one matcher and one evaluation. Scenarios share
// a control plane where they generate different objects; render is given
// every policy and trigger of the group, as the controller sees them.
func TestRenderAgreesWithTheController(t *testing.T) {
	files, err := filepath.Glob("../../fixtures/*/expected.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var groups [][]scenario
	for _, f := range files {
		dir := filepath.Dir(f)
		if _, err := os.Stat(filepath.Join(dir, "policy.yaml")); err != nil {
			continue // a repository layout, rendered whole elsewhere
		}
		sc := loadScenario(t, filepath.Base(dir))
		i := slices.IndexFunc(groups, func(g []scenario) bool {
			return !slices.ContainsFunc(g, sc.collides)
		})
		if i < 0 {
			groups = append(groups, nil)
			i = len(groups) - 1
		}
		groups[i] = append(groups[i], sc)
	}
	if n := len(slices.Concat(groups...)); n < 10 {
		t.Fatalf("found only %d scenarios with a policy.yaml and an expected.yaml", n)
	}
	// A control plane each, a few at a time: most of a group's time is
	// its control plane starting.
	slots := make(chan struct{}, 3)
	for _, g := range groups {
		var names []string
		for _, sc := range g {
			names = append(names, sc.name)
		}
		t.Run(strings.Join(names, ","), func(t *testing.T) {
			t.Parallel()
			slots <- struct{}{}
			defer func() { <-slots }()
			agree(t, g)
		})
	}
}

// scenario is one fixture folder, read.
type scenario struct {
	name                            string
	policy                          apiv1.Policy
	doc, triggers, context, outputs []*unstructured.Unstructured
}

func loadScenario(t *testing.T, name string) scenario {
	t.Helper()
	sc := scenario{name: name}
	var err error
	if sc.policy, err = fixtures.Policy(name); err != nil {
		t.Fatal(err)
	}
	if sc.doc, err = fixtures.Objects(name, "policy.yaml"); err != nil {
		t.Fatal(err)
	}
	if sc.triggers, err = fixtures.Objects(name, "triggers.yaml"); err != nil {
		t.Fatal(err)
	}
	if _, err := fixtures.Read(name, "context.yaml"); err == nil {
		if sc.context, err = fixtures.Objects(name, "context.yaml"); err != nil {
			t.Fatal(err)
		}
	}
	if sc.outputs, err = fixtures.Objects(name, "expected.yaml"); err != nil {
		t.Fatal(err)
	}
	return sc
}

// collides reports whether two scenarios cannot share a control plane:
// they generate an object of the same name, their inputs share a
// namespace, where one policy's resource.List would read the other's, or
// one generates, or needs a Namespace made for, what the other triggers on.
func (sc scenario) collides(other scenario) bool {
	if sc.triggersOn(other.made()) || other.triggersOn(sc.made()) {
		return true
	}
	mine := map[string]bool{}
	for _, o := range sc.outputs {
		mine["out "+fixtureID(o)] = true
	}
	for _, ns := range sc.namespaces() {
		mine["ns "+ns] = true
	}
	return slices.ContainsFunc(other.outputs, func(o *unstructured.Unstructured) bool { return mine["out "+fixtureID(o)] }) ||
		slices.ContainsFunc(other.namespaces(), func(ns string) bool { return mine["ns "+ns] })
}

// made is what a scenario makes in a control plane besides its inputs:
// its outputs, and the Namespaces they go to that no input makes.
func (sc scenario) made() []*unstructured.Unstructured {
	return slices.Concat(sc.outputs, missingNamespaces(sc.outputs, slices.Concat(sc.triggers, sc.context)))
}

// triggersOn reports whether the scenario's policy triggers on a kind of
// objs.
func (sc scenario) triggersOn(objs []*unstructured.Unstructured) bool {
	for _, r := range sc.policy.PolicySpec().MatchConstraints.ResourceRules {
		for _, o := range objs {
			gvr, _ := meta.UnsafeGuessKindToResource(o.GroupVersionKind())
			if slices.Contains(r.Resources, gvr.Resource) || slices.Contains(r.Resources, "*") {
				return true
			}
		}
	}
	return false
}

// namespaces are the namespaces of a scenario's inputs.
func (sc scenario) namespaces() []string {
	var out []string
	for _, o := range slices.Concat(sc.triggers, sc.context) {
		if o.GetKind() == "Namespace" {
			out = append(out, o.GetName())
		} else if o.GetNamespace() != "" {
			out = append(out, o.GetNamespace())
		}
	}
	return out
}

func fixtureID(u *unstructured.Unstructured) string {
	return fmt.Sprintf("%s %s/%s", u.GetKind(), u.GetNamespace(), u.GetName())
}

// unique drops objects given twice: scenarios of a group share some.
func unique(objs []*unstructured.Unstructured) []*unstructured.Unstructured {
	seen := map[string]bool{}
	return slices.DeleteFunc(slices.Clone(objs), func(o *unstructured.Unstructured) bool {
		id := fixtureID(o)
		dup := seen[id]
		seen[id] = true
		return dup
	})
}

func agree(t *testing.T, group []scenario) {
	var policies []apiv1.Policy
	var docs, triggers, contextObjs []*unstructured.Unstructured
	for _, sc := range group {
		policies = append(policies, sc.policy)
		docs = append(docs, sc.doc...)
		triggers = append(triggers, sc.triggers...)
		contextObjs = append(contextObjs, sc.context...)
	}
	triggers, contextObjs = unique(triggers), unique(contextObjs)
	want, err := offline.Render(context.Background(), policies, offline.Inputs{Triggers: triggers, Objects: contextObjs}, admission.Create, nil)
	if err != nil {
		t.Fatal(err)
	}

	cp := startControlPlane(t)
	// Render judges no identity; the controller refuses objects that grant
	// rights to a policy naming none. The fixtures are Kyverno's library
	// policies as they are, run as an operator moving from Kyverno would.
	runSprout(t, writeKubeconfig(t, cp), "--allow-unnamed-grants")
	client := dynamic.NewForConfigOrDie(cp.Config)
	apply(t, cp.Config, missingNamespaces(want, slices.Concat(triggers, contextObjs)))
	apply(t, cp.Config, contextObjs)
	apply(t, cp.Config, docs)
	for _, p := range policies {
		waitPolicyReady(t, client, p.GetName())
	}
	// The triggers come once the policies watch them: each is a CREATE.
	apply(t, cp.Config, triggers)

	mapper := restmapper.NewDeferredDiscoveryRESTMapper(memory.NewMemCacheClient(discovery.NewDiscoveryClientForConfigOrDie(cp.Config)))
	var got []*unstructured.Unstructured
	err = wait.PollUntilContextTimeout(context.Background(), 100*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
		got, err = generated(ctx, client, mapper, want)
		return err == nil && sameObjects(want, got) == "", err
	})
	if err != nil {
		t.Fatalf("the controller and render disagree: %v\n%s", err, sameObjects(want, got))
	}
}

// missingNamespaces returns the Namespaces objects are generated into that
// no input makes: render needs none, the API server does.
func missingNamespaces(want, inputs []*unstructured.Unstructured) []*unstructured.Unstructured {
	have := map[string]bool{"default": true, "kube-system": true}
	for _, o := range inputs {
		if o.GetKind() == "Namespace" {
			have[o.GetName()] = true
		}
	}
	var out []*unstructured.Unstructured
	for _, w := range want {
		if ns := w.GetNamespace(); ns != "" && !have[ns] {
			have[ns] = true
			u := &unstructured.Unstructured{}
			u.SetAPIVersion("v1")
			u.SetKind("Namespace")
			u.SetName(ns)
			out = append(out, u)
		}
	}
	return out
}

// apply applies objects without the UIDs the fixtures give them so that
// render can trace clones: the server gives its own.
func apply(t *testing.T, config *rest.Config, objs []*unstructured.Unstructured) {
	t.Helper()
	a, err := manifest.NewApplier(config)
	if err != nil {
		t.Fatal(err)
	}
	for _, o := range objs {
		o = o.DeepCopy()
		o.SetUID("")
		if err := a.Apply(context.Background(), o); err != nil {
			t.Fatal(err)
		}
	}
}

func waitPolicyReady(t *testing.T, client dynamic.Interface, name string) {
	t.Helper()
	err := wait.PollUntilContextTimeout(context.Background(), 50*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
		u, err := client.Resource(apiv1.GeneratingPolicies).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		p, err := apiv1.FromUnstructured(u)
		if err != nil {
			return false, err
		}
		return meta.IsStatusConditionTrue(p.(*apiv1.GeneratingPolicy).Status.Conditions, reconcile.ConditionReady), nil
	})
	if err != nil {
		t.Fatalf("waiting for policy %s to be Ready: %v", name, err)
	}
}

// generated lists what Sprout generated, in every kind render generated
// and the kinds the fixtures generate.
func generated(ctx context.Context, client dynamic.Interface, mapper meta.RESTMapper, want []*unstructured.Unstructured) ([]*unstructured.Unstructured, error) {
	kinds := []schema.GroupVersionKind{{Version: "v1", Kind: "ConfigMap"}, {Version: "v1", Kind: "Secret"}, {Group: "networking.k8s.io", Version: "v1", Kind: "NetworkPolicy"}}
	for _, w := range want {
		if !slices.Contains(kinds, w.GroupVersionKind()) {
			kinds = append(kinds, w.GroupVersionKind())
		}
	}
	var out []*unstructured.Unstructured
	for _, gvk := range kinds {
		m, err := mapper.RESTMapping(gvk.GroupKind(), gvk.Version)
		if err != nil {
			return nil, err
		}
		list, err := client.Resource(m.Resource).List(ctx, metav1.ListOptions{LabelSelector: sproutv1alpha1.LabelManagedBy + "=sprout"})
		if err != nil {
			return nil, err
		}
		for i := range list.Items {
			out = append(out, &list.Items[i])
		}
	}
	return out, nil
}

// sameObjects says how got differs from want, or "" when it does not: the
// same objects, each holding every field render gave it (the server adds
// its own), the trigger's UID aside, which render cannot know.
func sameObjects(want, got []*unstructured.Unstructured) string {
	id := fixtureID
	byID := map[string]*unstructured.Unstructured{}
	for _, g := range got {
		byID[id(g)] = g
	}
	var diffs []string
	for _, w := range want {
		g, ok := byID[id(w)]
		delete(byID, id(w))
		if !ok {
			diffs = append(diffs, "render gave "+id(w)+", the controller did not")
			continue
		}
		w := w.DeepCopy()
		labels := w.GetLabels()
		for k := range labels {
			if strings.HasSuffix(k, "-uid") {
				delete(labels, k) // the fixtures' made-up UIDs
			}
		}
		w.SetLabels(labels)
		if path := missingIn(w.Object, g.Object, ""); path != "" {
			diffs = append(diffs, fmt.Sprintf("%s: the controller's object differs at %s", id(w), path))
		}
	}
	for k := range byID {
		diffs = append(diffs, "the controller gave "+k+", render did not")
	}
	slices.Sort(diffs)
	return strings.Join(diffs, "\n")
}

// missingIn returns the first path of want that got does not hold equal.
func missingIn(want, got any, path string) string {
	wm, ok := want.(map[string]any)
	if !ok {
		if !reflect.DeepEqual(want, got) {
			return path
		}
		return ""
	}
	gm, ok := got.(map[string]any)
	if !ok {
		return path
	}
	for k, v := range wm {
		if p := missingIn(v, gm[k], path+"."+k); p != "" {
			return p
		}
	}
	return ""
}
