package policyreport

import (
	"testing"
	"unique"

	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// A held result says what it was given, and reads back from the report
// written of it as the same result: the compact form loses nothing.
func TestEntriesKeepWhatResultsSay(t *testing.T) {
	p := &metav1.ObjectMeta{Name: "b-quota", Annotations: map[string]string{AnnotationCategory: "Multi-Tenancy", AnnotationSeverity: "high"}}
	q := &metav1.ObjectMeta{Namespace: "team", Name: "a-copy"}
	pass := Pass(p, map[string]string{"owner": "ops"}, nil)
	excepted := Excepted(q, []string{"team/allow"}, "")

	var es entries
	es = es.set(entryOf(pass, 10))
	es = es.set(entryOf(excepted, 20))
	if es[0].policy() != "b-quota" || es[1].policy() != "team/a-copy" {
		t.Fatalf("entries not sorted by policy: %q, %q", es[0].policy(), es[1].policy())
	}
	if i, ok := es.find("b-quota"); !ok || !es[i].says(pass) || es[i].says(excepted) {
		t.Fatalf("b-quota's entry does not say exactly its result")
	}
	changed := Pass(p, map[string]string{"owner": "dev"}, nil)
	if i, _ := es.find("b-quota"); es[i].says(changed) {
		t.Fatalf("an entry says a result whose property differs")
	}
	fewer := Pass(p, nil, nil)
	if i, _ := es.find("b-quota"); es[i].says(fewer) {
		t.Fatalf("an entry says a result with fewer properties")
	}

	report := sent(t, reportOf(WGPolicy, Trigger{APIVersion: "v1", Kind: "ConfigMap", Namespace: "team", Name: "c", UID: "u1"}, es))
	items := report.Object["results"].([]any)
	var back entries
	for _, item := range items {
		back = back.set(resultOf(item.(map[string]any)))
	}
	if diff := cmp.Diff(es, back, cmp.AllowUnexported(entry{}), cmp.Comparer(func(a, b unique.Handle[said]) bool { return a == b })); diff != "" {
		t.Errorf("results read back from the report differ (-held +read):\n%s", diff)
	}

	es, dropped := es.without("team/a-copy")
	if !dropped || len(es) != 1 || es[0].policy() != "b-quota" {
		t.Fatalf("without: dropped %v, left %d", dropped, len(es))
	}
	if _, dropped := es.without("team/a-copy"); dropped {
		t.Fatalf("without dropped a policy twice")
	}
}
