package access

import (
	"slices"
	"testing"

	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

func rule(groups, resources, verbs []string) rbacv1.PolicyRule {
	return rbacv1.PolicyRule{APIGroups: groups, Resources: resources, Verbs: verbs}
}

func l(s ...string) []string { return s }

// TestRequestsOf: a role's rules become one access review per verb,
// group, resource (subresource, name) and per URL and verb, wildcards
// passed through as they are, without repeats.
func TestRequestsOf(t *testing.T) {
	for _, tc := range []struct {
		name  string
		rules []rbacv1.PolicyRule
		want  []string
	}{
		{name: "nothing"},
		{name: "verbs on resources", rules: []rbacv1.PolicyRule{rule(l(""), l("configmaps", "pods"), l("get", "create"))},
			want: l("get on configmaps", "get on pods", "create on configmaps", "create on pods")},
		{name: "a subresource", rules: []rbacv1.PolicyRule{rule(l(""), l("pods/ephemeralcontainers"), l("patch"))},
			want: l("patch on pods/ephemeralcontainers")},
		{name: "wildcards passed through", rules: []rbacv1.PolicyRule{rule(l("*"), l("*", "*/scale"), l("*"))},
			want: l("* on *.*", "* on */scale.*")},
		{name: "a group", rules: []rbacv1.PolicyRule{rule(l("admissionregistration.k8s.io"), l("mutatingwebhookconfigurations"), l("create"))},
			want: l("create on mutatingwebhookconfigurations.admissionregistration.k8s.io")},
		{name: "names", rules: []rbacv1.PolicyRule{{APIGroups: l(rbacv1.GroupName), Resources: l("roles"), ResourceNames: l("a", "b"), Verbs: l("bind")}},
			want: l("bind on roles.rbac.authorization.k8s.io named a", "bind on roles.rbac.authorization.k8s.io named b")},
		{name: "URLs", rules: []rbacv1.PolicyRule{{NonResourceURLs: l("/*", "/healthz"), Verbs: l("*", "get")}},
			want: l("* on URL /*", "* on URL /healthz", "get on URL /*", "get on URL /healthz")},
		{name: "repeats", rules: []rbacv1.PolicyRule{rule(l(""), l("pods"), l("get")), rule(l(""), l("pods"), l("get", "list"))},
			want: l("get on pods", "list on pods")},
		{name: "no verbs", rules: []rbacv1.PolicyRule{rule(l("*"), l("*"), nil)}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var got []string
			for _, q := range requestsOf(tc.rules) {
				got = append(got, q.String())
			}
			if !slices.Equal(got, tc.want) {
				t.Errorf("requests %q, want %q", got, tc.want)
			}
		})
	}
	q := requestsOf([]rbacv1.PolicyRule{rule(l(""), l("pods/ephemeralcontainers"), l("patch"))})[0]
	if q.Resource != "pods" || q.Subresource != "ephemeralcontainers" {
		t.Errorf("the subresource is not asked as one: %+v", q)
	}
}

// TestGrantsRights: which generated objects grant rights, by group, by
// kind, by a Secret's type, and by a pod spec at any depth of any kind.
func TestGrantsRights(t *testing.T) {
	obj := func(apiVersion, kind string, fields map[string]any) *unstructured.Unstructured {
		u := &unstructured.Unstructured{Object: map[string]any{"apiVersion": apiVersion, "kind": kind}}
		for k, v := range fields {
			u.Object[k] = v
		}
		return u
	}
	containers := []any{map[string]any{"name": "c", "image": "busybox"}}
	podSpec := map[string]any{"containers": containers}
	for _, tc := range []struct {
		name string
		obj  *unstructured.Unstructured
		want string
	}{
		{"a RoleBinding", obj("rbac.authorization.k8s.io/v1", "RoleBinding", nil), "an RBAC object"},
		{"a ClusterRole", obj("rbac.authorization.k8s.io/v1", "ClusterRole", nil), "an RBAC object"},
		{"a webhook", obj("admissionregistration.k8s.io/v1", "MutatingWebhookConfiguration", nil), "an admission configuration, which sees or changes requests"},
		{"a CSR", obj("certificates.k8s.io/v1", "CertificateSigningRequest", nil), "a certificates object, which mints credentials"},
		{"an APIService", obj("apiregistration.k8s.io/v1", "APIService", nil), "an APIService, to which the API server sends requests"},
		{"a token Secret", obj("v1", "Secret", map[string]any{"type": "kubernetes.io/service-account-token"}), "a ServiceAccount token Secret"},
		{"an opaque Secret", obj("v1", "Secret", map[string]any{"type": "Opaque"}), ""},
		{"a ConfigMap", obj("v1", "ConfigMap", map[string]any{"data": map[string]any{"containers": "[]"}}), ""},
		{"a Pod", obj("v1", "Pod", map[string]any{"spec": podSpec}), "it runs a workload (spec.containers)"},
		{"a Deployment", obj("apps/v1", "Deployment", map[string]any{"spec": map[string]any{"template": map[string]any{"spec": podSpec}}}),
			"it runs a workload (spec.template.spec.containers)"},
		{"a CronJob", obj("batch/v1", "CronJob", map[string]any{"spec": map[string]any{"jobTemplate": map[string]any{"spec": map[string]any{
			"template": map[string]any{"spec": podSpec}}}}}), "it runs a workload (spec.jobTemplate.spec.template.spec.containers)"},
		{"a custom kind in a list", obj("example.com/v1", "Runner", map[string]any{"spec": map[string]any{"workers": []any{
			map[string]any{"initContainers": containers}}}}), "it runs a workload (spec.workers[0].initContainers)"},
		{"a list of names", obj("example.com/v1", "Inventory", map[string]any{"containers": []any{"a", "b"}}), ""},
		{"an empty list", obj("v1", "Pod", map[string]any{"spec": map[string]any{"containers": []any{}}}), ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			gk := schema.FromAPIVersionAndKind(tc.obj.GetAPIVersion(), tc.obj.GetKind()).GroupKind()
			if got := GrantsRights(tc.obj, gk); got != tc.want {
				t.Errorf("GrantsRights = %q, want %q", got, tc.want)
			}
		})
	}
}

// TestGrantsRightsAllocatesNothingWithoutAPodSpec: every object a sync
// generates is asked, and almost none runs a workload. The answer for one
// that does not is found without naming a path (it was a string for every
// key at every depth, and a sorted copy of every map's keys).
func TestGrantsRightsAllocatesNothingWithoutAPodSpec(t *testing.T) {
	obj := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "v1", "kind": "ConfigMap",
		"metadata": map[string]any{"name": "a", "namespace": "b", "labels": map[string]any{"role": "copy"},
			"annotations": map[string]any{"x": "y"}},
		"data": map[string]any{"source": "a", "containers": "[]"},
		"list": []any{map[string]any{"a": []any{"b"}}},
	}}
	gk := schema.GroupKind{Kind: "ConfigMap"}
	if got := GrantsRights(obj, gk); got != "" {
		t.Fatalf("GrantsRights = %q", got)
	}
	if n := testing.AllocsPerRun(100, func() { GrantsRights(obj, gk) }); n != 0 {
		t.Errorf("GrantsRights of a ConfigMap allocated %v times", n)
	}
}
