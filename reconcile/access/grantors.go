package access

// Which generated objects grant rights: those a policy may write only as
// an identity it names, so that the API server judges the write as it
// judges kubectl's.

import (
	"maps"
	"slices"
	"strconv"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// grantingGroups are the API groups every kind of which grants rights:
// RBAC, admission webhooks and policies (which see or change every
// request), and certificates (which mint credentials).
var grantingGroups = map[string]string{
	rbacv1.GroupName:               "an RBAC object",
	"admissionregistration.k8s.io": "an admission configuration, which sees or changes requests",
	"certificates.k8s.io":          "a certificates object, which mints credentials",
}

// podSpecLists are the lists whose objects are containers: whoever writes
// them runs a workload, as the account it names.
var podSpecLists = []string{"containers", "initContainers", "ephemeralContainers"}

// GrantsRights says why obj, of kind gk, grants rights to whoever it names
// or runs, or "" when it does not. Such an object is one its writer could
// use to act beyond the policy's own rights: any RBAC, admission
// registration or certificates object; an APIService (the API server
// sends it requests, credentials included); a ServiceAccount token Secret;
// and anything that carries a pod spec, told by its content, not its kind
// (a list of containers at any depth: Pods, Deployments, CronJobs and
// custom kinds alike).
func GrantsRights(obj *unstructured.Unstructured, gk schema.GroupKind) string {
	if why, ok := grantingGroups[gk.Group]; ok {
		return why
	}
	switch {
	case gk == schema.GroupKind{Group: "apiregistration.k8s.io", Kind: "APIService"}:
		return "an APIService, to which the API server sends requests"
	case gk == schema.GroupKind{Kind: "Secret"} && obj.Object["type"] == string(corev1.SecretTypeServiceAccountToken):
		return "a ServiceAccount token Secret"
	}
	if holdsPodSpec(obj.Object) {
		return "it runs a workload (" + podSpecPath(obj.Object, "") + ")"
	}
	return ""
}

// holdsPodSpec reports whether v holds a list of containers at any depth.
// It is podSpecPath's question without the path, asked of every object a
// sync generates, where almost none holds one: it visits in any order and
// names nothing, so it allocates nothing.
func holdsPodSpec(v any) bool {
	switch v := v.(type) {
	case map[string]any:
		for _, name := range podSpecLists {
			if list, ok := v[name].([]any); ok && anyObject(list) {
				return true
			}
		}
		for _, child := range v {
			if holdsPodSpec(child) {
				return true
			}
		}
	case []any:
		for _, child := range v {
			if holdsPodSpec(child) {
				return true
			}
		}
	}
	return false
}

// podSpecPath returns the path of the first list of containers in v, ""
// when it holds none. A list of containers holds at least one object.
func podSpecPath(v any, at string) string {
	switch v := v.(type) {
	case map[string]any:
		for _, name := range podSpecLists {
			if list, ok := v[name].([]any); ok && anyObject(list) {
				return join(at, name)
			}
		}
		// In order: a refusal names the same path at every sync.
		for _, k := range slices.Sorted(maps.Keys(v)) {
			if p := podSpecPath(v[k], join(at, k)); p != "" {
				return p
			}
		}
	case []any:
		for i, child := range v {
			if p := podSpecPath(child, at+"["+strconv.Itoa(i)+"]"); p != "" {
				return p
			}
		}
	}
	return ""
}

func anyObject(list []any) bool {
	for _, e := range list {
		if _, ok := e.(map[string]any); ok {
			return true
		}
	}
	return false
}

func join(at, key string) string {
	if at == "" {
		return key
	}
	return at + "." + key
}
