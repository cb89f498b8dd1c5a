package access

import (
	"slices"
	"testing"

	rbacv1 "k8s.io/api/rbac/v1"
)

func rule(groups, resources, verbs []string) rbacv1.PolicyRule {
	return rbacv1.PolicyRule{APIGroups: groups, Resources: resources, Verbs: verbs}
}

func l(s ...string) []string { return s }

// TestGuardedGrants: what guardedGrants refuses from a RoleBinding (in one
// namespace) and from a ClusterRoleBinding, for many shapes of rules.
func TestGuardedGrants(t *testing.T) {
	const (
		all      = "every verb on every resource"
		allURLs  = "every verb on every URL"
		escalate = "escalate on roles"
		bind     = "bind on roles"
		imperson = "impersonate on users, groups, uids or userextras"
		saImp    = "impersonate on serviceaccounts in every namespace"
		token    = "create on serviceaccounts/token in every namespace"
		secrets  = "get, list or watch on secrets in every namespace"
		exec     = "create or get on pods/exec or pods/attach in every namespace"
		proxy    = "nodes/proxy (the kubelet's API)"
		approval = "update or patch on certificatesigningrequests/approval"
		signers  = "approve or sign on signers"
	)
	everything := []string{all, escalate, bind, imperson}
	everythingCluster := []string{all, escalate, bind, imperson, saImp, token, secrets, exec, proxy, approval, signers}
	for _, tc := range []struct {
		name string
		// want in a namespace, and cluster-wide.
		rules                []rbacv1.PolicyRule
		namespaced, clusterW []string
	}{
		{name: "nothing", namespaced: nil, clusterW: nil},
		{name: "configmaps", rules: []rbacv1.PolicyRule{rule(l(""), l("configmaps"), l("get", "list", "watch", "create", "update", "patch", "delete"))}},
		{name: "view-like: read everything but secrets", rules: []rbacv1.PolicyRule{rule(l("", "apps"), l("pods", "services", "deployments"), l("get", "list", "watch"))}},
		{name: "star star star", rules: []rbacv1.PolicyRule{rule(l("*"), l("*"), l("*"))}, namespaced: everything, clusterW: everythingCluster},
		{name: "star verbs and resources in one group", rules: []rbacv1.PolicyRule{rule(l("apps"), l("*"), l("*"))}, namespaced: l(all), clusterW: l(all)},
		{name: "every verb spelt out on every resource", rules: []rbacv1.PolicyRule{rule(l("*"), l("*"), everyVerb)},
			namespaced: l(all), clusterW: l(all, token, secrets, exec, proxy, approval)},
		{name: "every verb spelt out over two rules", rules: []rbacv1.PolicyRule{
			rule(l("*"), l("*"), l("get", "list", "watch")),
			rule(l("*"), l("*"), l("create", "update", "patch", "delete", "deletecollection")),
		}, namespaced: l(all), clusterW: l(all, token, secrets, exec, proxy, approval)},
		{name: "every verb but one on every resource", rules: []rbacv1.PolicyRule{rule(l("*"), l("*"), everyVerb[:7])},
			namespaced: nil, clusterW: l(token, secrets, exec, proxy, approval)},
		{name: "read every resource", rules: []rbacv1.PolicyRule{rule(l("*"), l("*"), l("get", "list", "watch"))},
			namespaced: nil, clusterW: l(secrets, exec, proxy)},
		{name: "every URL", rules: []rbacv1.PolicyRule{{NonResourceURLs: l("*"), Verbs: l("*")}}, namespaced: l(allURLs), clusterW: l(allURLs)},
		{name: "some URLs", rules: []rbacv1.PolicyRule{{NonResourceURLs: l("/healthz", "/metrics"), Verbs: l("get")}}},
		{name: "escalate", rules: []rbacv1.PolicyRule{rule(l("rbac.authorization.k8s.io"), l("clusterroles"), l("escalate", "get"))}, namespaced: l(escalate), clusterW: l(escalate)},
		{name: "escalate on roles by name", rules: []rbacv1.PolicyRule{{APIGroups: l("rbac.authorization.k8s.io"), Resources: l("roles"), ResourceNames: l("one"), Verbs: l("escalate")}},
			namespaced: l(escalate), clusterW: l(escalate)},
		{name: "bind", rules: []rbacv1.PolicyRule{rule(l("rbac.authorization.k8s.io"), l("roles"), l("bind"))}, namespaced: l(bind), clusterW: l(bind)},
		{name: "every verb on clusterroles", rules: []rbacv1.PolicyRule{rule(l("rbac.authorization.k8s.io"), l("clusterroles"), l("*"))}, namespaced: l(escalate, bind), clusterW: l(escalate, bind)},
		{name: "write roles without escalate or bind", rules: []rbacv1.PolicyRule{rule(l("rbac.authorization.k8s.io"), l("roles", "rolebindings"), l("create", "update", "patch", "delete"))}},
		{name: "escalate in another group", rules: []rbacv1.PolicyRule{rule(l("example.com"), l("roles"), l("escalate"))}},
		{name: "impersonate users", rules: []rbacv1.PolicyRule{rule(l(""), l("users"), l("impersonate"))}, namespaced: l(imperson), clusterW: l(imperson)},
		{name: "impersonate groups", rules: []rbacv1.PolicyRule{rule(l(""), l("groups"), l("impersonate"))}, namespaced: l(imperson), clusterW: l(imperson)},
		{name: "impersonate uids", rules: []rbacv1.PolicyRule{rule(l("authentication.k8s.io"), l("uids"), l("impersonate"))}, namespaced: l(imperson), clusterW: l(imperson)},
		{name: "impersonate userextras", rules: []rbacv1.PolicyRule{rule(l("authentication.k8s.io"), l("userextras/scopes"), l("impersonate"))}, namespaced: l(imperson), clusterW: l(imperson)},
		{name: "impersonate any subresource", rules: []rbacv1.PolicyRule{rule(l("authentication.k8s.io"), l("*/scopes"), l("impersonate"))}, namespaced: l(imperson), clusterW: l(imperson)},
		{name: "impersonate everything", rules: []rbacv1.PolicyRule{rule(l("*"), l("*"), l("impersonate"))}, namespaced: l(imperson), clusterW: l(imperson, saImp)},
		{name: "impersonate serviceaccounts", rules: []rbacv1.PolicyRule{rule(l(""), l("serviceaccounts"), l("impersonate"))}, clusterW: l(saImp)},
		{name: "create tokens", rules: []rbacv1.PolicyRule{rule(l(""), l("serviceaccounts/token"), l("create"))}, clusterW: l(token)},
		{name: "create any token subresource", rules: []rbacv1.PolicyRule{rule(l(""), l("*/token"), l("create"))}, clusterW: l(token)},
		{name: "read token of serviceaccounts", rules: []rbacv1.PolicyRule{rule(l(""), l("serviceaccounts", "serviceaccounts/token"), l("get", "list"))}},
		{name: "list secrets", rules: []rbacv1.PolicyRule{rule(l(""), l("secrets"), l("list"))}, clusterW: l(secrets)},
		{name: "every verb on secrets", rules: []rbacv1.PolicyRule{rule(l(""), l("secrets"), l("*"))}, clusterW: l(secrets)},
		{name: "write secrets only", rules: []rbacv1.PolicyRule{rule(l(""), l("secrets"), l("create", "delete"))}},
		{name: "secrets in another group", rules: []rbacv1.PolicyRule{rule(l("example.com"), l("secrets"), l("get"))}},
		{name: "exec", rules: []rbacv1.PolicyRule{rule(l(""), l("pods/exec"), l("create"))}, clusterW: l(exec)},
		{name: "attach over a WebSocket", rules: []rbacv1.PolicyRule{rule(l(""), l("pods/attach"), l("get"))}, clusterW: l(exec)},
		{name: "pods only", rules: []rbacv1.PolicyRule{rule(l(""), l("pods", "pods/log"), l("get", "list", "watch", "delete"))}},
		{name: "nodes/proxy", rules: []rbacv1.PolicyRule{rule(l(""), l("nodes/proxy"), l("get"))}, clusterW: l(proxy)},
		{name: "nodes", rules: []rbacv1.PolicyRule{rule(l(""), l("nodes", "nodes/status"), l("get", "list", "watch", "patch"))}},
		{name: "approve CSRs", rules: []rbacv1.PolicyRule{
			rule(l("certificates.k8s.io"), l("certificatesigningrequests/approval"), l("update")),
			rule(l("certificates.k8s.io"), l("signers"), l("approve")),
		}, clusterW: l(approval, signers)},
		{name: "create CSRs", rules: []rbacv1.PolicyRule{rule(l("certificates.k8s.io"), l("certificatesigningrequests"), l("create", "get", "list", "watch"))}},
		{name: "no verbs", rules: []rbacv1.PolicyRule{rule(l("*"), l("*"), nil)}},
		{name: "no groups", rules: []rbacv1.PolicyRule{rule(nil, l("users"), l("impersonate"))}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := guardedGrants(tc.rules, false); !slices.Equal(got, tc.namespaced) {
				t.Errorf("in a namespace: %q, want %q", got, tc.namespaced)
			}
			if got := guardedGrants(tc.rules, true); !slices.Equal(got, tc.clusterW) {
				t.Errorf("cluster-wide: %q, want %q", got, tc.clusterW)
			}
		})
	}
}

// TestResourceMatches: a rule's resource covers another as the RBAC
// authorizer matches them.
func TestResourceMatches(t *testing.T) {
	for _, tc := range []struct {
		res, want string
		ok        bool
	}{
		{"*", "secrets", true},
		{"secrets", "secrets", true},
		{"secret", "secrets", false},
		{"pods", "pods/exec", false},
		{"*/exec", "pods/exec", true},
		{"*/log", "pods/exec", false},
		{"userextras/scopes", "userextras/*", true},
		{"userextras", "userextras/*", false},
		{"*/scopes", "userextras/*", true},
		{"users", "userextras/*", false},
	} {
		if got := resourceMatches(tc.res, tc.want); got != tc.ok {
			t.Errorf("resourceMatches(%q, %q) = %v", tc.res, tc.want, got)
		}
	}
}
