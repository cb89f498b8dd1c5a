package evaluate

import (
	"fmt"
	"testing"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apiserver/pkg/admission"
	listersv1 "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"

	"github.com/sprout-gitops/sprout/cluster"
	"github.com/sprout-gitops/sprout/reconcile/policy"
)

// TestSelectableMatchesAsTheObject: the matcher, given what selectable
// keeps of a trigger (its identity, and its labels when a selector reads
// them), decides as it does given the whole decoded object, for the
// selectors on Namespaces and on namespaced objects and for none.
func TestSelectableMatchesAsTheObject(t *testing.T) {
	namespaces := cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{})
	for name, labels := range map[string]map[string]string{"red": {"color": "red"}, "blue": {"color": "blue"}} {
		if err := namespaces.Add(&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels}}); err != nil {
			t.Fatal(err)
		}
	}
	m := NewMatcher(listersv1.NewNamespaceLister(namespaces), nil)
	red := &metav1.LabelSelector{MatchLabels: map[string]string{"color": "red"}}
	rules := func(resource string) []admissionregistrationv1.NamedRuleWithOperations {
		return []admissionregistrationv1.NamedRuleWithOperations{{RuleWithOperations: admissionregistrationv1.RuleWithOperations{
			Operations: []admissionregistrationv1.OperationType{admissionregistrationv1.OperationAll},
			Rule:       admissionregistrationv1.Rule{APIGroups: []string{""}, APIVersions: []string{"v1"}, Resources: []string{resource}},
		}}}
	}
	triggers := map[string]struct {
		gvr schema.GroupVersionResource
		raw string
	}{
		"red Namespace":         {schema.GroupVersionResource{Version: "v1", Resource: "namespaces"}, `{"kind":"Namespace","apiVersion":"v1","metadata":{"name":"red","uid":"u-1","labels":{"color":"red"}}}`},
		"unlabelled Namespace":  {schema.GroupVersionResource{Version: "v1", Resource: "namespaces"}, `{"kind":"Namespace","apiVersion":"v1","metadata":{"name":"plain","uid":"u-2"}}`},
		"red ConfigMap in red":  {schema.GroupVersionResource{Version: "v1", Resource: "configmaps"}, `{"kind":"ConfigMap","apiVersion":"v1","metadata":{"name":"c","namespace":"red","uid":"u-3","labels":{"color":"red"}},"data":{"color":"blue"}}`},
		"ConfigMap in blue":     {schema.GroupVersionResource{Version: "v1", Resource: "configmaps"}, `{"kind":"ConfigMap","apiVersion":"v1","metadata":{"name":"c","namespace":"blue","uid":"u-4","labels":{"color":"red"}}}`},
		"blue ConfigMap in red": {schema.GroupVersionResource{Version: "v1", Resource: "configmaps"}, `{"kind":"ConfigMap","apiVersion":"v1","metadata":{"name":"c","namespace":"red","uid":"u-5","labels":{"color":"blue"}}}`},
	}
	for _, resource := range []string{"namespaces", "configmaps"} {
		for sel, mr := range map[string]admissionregistrationv1.MatchResources{
			"none":              {ResourceRules: rules(resource)},
			"objectSelector":    {ResourceRules: rules(resource), ObjectSelector: red},
			"namespaceSelector": {ResourceRules: rules(resource), NamespaceSelector: red},
			"both":              {ResourceRules: rules(resource), ObjectSelector: red, NamespaceSelector: red},
		} {
			crit := policy.NewCriteria(mr).Events
			if got, want := crit.ReadsLabels(), sel != "none"; got != want {
				t.Errorf("%s: readsLabels %v, want %v", sel, got, want)
			}
			matched := 0
			for name, tt := range triggers {
				o, err := cluster.Triggers.FromJSON([]byte(tt.raw))
				if err != nil {
					t.Fatal(err)
				}
				ops := []admission.Operation{admission.Create, admission.Update}
				if tt.gvr.Resource != "namespaces" {
					// A Namespace's DELETE reads its labels from the API server.
					ops = append(ops, admission.Delete)
				}
				for _, op := range ops {
					want, wantErr := m.MatchesCriteria(crit, tt.gvr, op, o.GroupVersionKind(), o.Decode())
					got, gotErr := m.MatchesCriteria(crit, tt.gvr, op, o.GroupVersionKind(), o.Selectable(crit.ReadsLabels()))
					if got != want || fmt.Sprint(gotErr) != fmt.Sprint(wantErr) {
						t.Errorf("%s %s, %s: %v (%v) from selectable, %v (%v) from the object", resource, sel, name, got, gotErr, want, wantErr)
					}
					if want {
						matched++
					}
				}
			}
			if matched == 0 {
				t.Errorf("%s %s: nothing matched: the comparison shows nothing", resource, sel)
			}
		}
	}
}
