package access

import (
	"slices"
	"strings"

	rbacv1 "k8s.io/api/rbac/v1"
)

// power is a grant Sprout does not bind, for its holder could use it to
// gain more than the role names: rewrite or bind roles, act as someone
// else, or read the credentials of others.
type power struct {
	// says is how a refusal names it.
	says string
	// A rule grants the power when it grants one of verbs on
	// one of resources ("resource" or "resource/subresource"; "x/*" is any
	// subresource of x) in one of groups. resourceNames are not looked at:
	// a rule that names one user or role to impersonate or bind is judged
	// as one that names all, since which one is powerful cannot be told.
	verbs, groups, resources []string
	// clusterWide: refused only from a ClusterRoleBinding. In one
	// namespace, reading its Secrets, running or exec'ing its pods and
	// acting as its ServiceAccounts is what Kubernetes' own admin and edit
	// roles grant there, and binding them so is ordinary tenancy. The
	// cluster-scoped resources (nodes, certificate signing) are granted by
	// a ClusterRoleBinding alone.
	clusterWide bool
}

const (
	legacyGroup = ""
	authnGroup  = "authentication.k8s.io"
	certsGroup  = "certificates.k8s.io"
)

// powers are what guardedGrants refuses, besides every verb on every
// resource or URL.
var powers = []power{
	{says: "escalate on roles", verbs: []string{"escalate"}, groups: []string{rbacv1.GroupName}, resources: []string{"roles", "clusterroles"}},
	{says: "bind on roles", verbs: []string{"bind"}, groups: []string{rbacv1.GroupName}, resources: []string{"roles", "clusterroles"}},
	{says: "impersonate on users, groups, uids or userextras", verbs: []string{"impersonate"},
		groups: []string{legacyGroup, authnGroup}, resources: []string{"users", "groups", "uids", "userextras/*"}},
	{says: "impersonate on serviceaccounts in every namespace", clusterWide: true, verbs: []string{"impersonate"},
		groups: []string{legacyGroup}, resources: []string{"serviceaccounts"}},
	{says: "create on serviceaccounts/token in every namespace", clusterWide: true, verbs: []string{"create"},
		groups: []string{legacyGroup}, resources: []string{"serviceaccounts/token"}},
	{says: "get, list or watch on secrets in every namespace", clusterWide: true, verbs: []string{"get", "list", "watch"},
		groups: []string{legacyGroup}, resources: []string{"secrets"}},
	// An exec is a create (POST) or, over a WebSocket, a get.
	{says: "create or get on pods/exec or pods/attach in every namespace", clusterWide: true, verbs: []string{"create", "get"},
		groups: []string{legacyGroup}, resources: []string{"pods/exec", "pods/attach"}},
	// The kubelet maps its HTTP methods to these verbs.
	{says: "nodes/proxy (the kubelet's API)", clusterWide: true, verbs: []string{"get", "create", "update", "patch", "delete"},
		groups: []string{legacyGroup}, resources: []string{"nodes/proxy"}},
	{says: "update or patch on certificatesigningrequests/approval", clusterWide: true, verbs: []string{"update", "patch"},
		groups: []string{certsGroup}, resources: []string{"certificatesigningrequests/approval"}},
	{says: "approve or sign on signers", clusterWide: true, verbs: []string{"approve", "sign"},
		groups: []string{certsGroup}, resources: []string{"signers"}},
}

// everyVerb are the verbs every resource serves: a role that lists them
// all on every resource grants what "*" does there (escalate, bind and
// impersonate are judged as powers).
var everyVerb = []string{"get", "list", "watch", "create", "update", "patch", "delete", "deletecollection"}

// everyURLVerb are the verbs of non-resource URLs, as "*" grants them.
var everyURLVerb = []string{"get", "post", "put", "patch", "delete", "head", "options"}

// guardedGrants says what of rules Sprout will not bind: from a
// ClusterRoleBinding (clusterWide), or a RoleBinding, which grants them in
// its namespace alone. None: the rules may be bound.
func guardedGrants(rules []rbacv1.PolicyRule, clusterWide bool) []string {
	var out []string
	// Every verb, counted over the rules: "*" may be spelt out, over
	// several rules.
	var onEveryResource, onEveryURL []string
	for _, r := range rules {
		if slices.Contains(r.Resources, rbacv1.ResourceAll) {
			onEveryResource = append(onEveryResource, r.Verbs...)
		}
		if slices.Contains(r.NonResourceURLs, rbacv1.NonResourceAll) {
			onEveryURL = append(onEveryURL, r.Verbs...)
		}
	}
	if coversAll(onEveryResource, everyVerb) {
		out = append(out, "every verb on every resource")
	}
	if coversAll(onEveryURL, everyURLVerb) {
		out = append(out, "every verb on every URL")
	}
	for _, p := range powers {
		if p.clusterWide && !clusterWide {
			continue
		}
		if slices.ContainsFunc(rules, p.grantedBy) {
			out = append(out, p.says)
		}
	}
	return out
}

// coversAll reports whether verbs hold "*" or every one of all.
func coversAll(verbs, all []string) bool {
	if slices.Contains(verbs, rbacv1.VerbAll) {
		return true
	}
	for _, v := range all {
		if !slices.Contains(verbs, v) {
			return false
		}
	}
	return true
}

// grantedBy reports whether rule r grants p, as the RBAC authorizer
// matches a request to a rule ("*", and "*/subresource").
func (p power) grantedBy(r rbacv1.PolicyRule) bool {
	if !slices.ContainsFunc(r.Verbs, func(v string) bool { return v == rbacv1.VerbAll || slices.Contains(p.verbs, v) }) {
		return false
	}
	if !slices.ContainsFunc(r.APIGroups, func(g string) bool { return g == rbacv1.APIGroupAll || slices.Contains(p.groups, g) }) {
		return false
	}
	return slices.ContainsFunc(r.Resources, func(res string) bool {
		return slices.ContainsFunc(p.resources, func(want string) bool { return resourceMatches(res, want) })
	})
}

// resourceMatches reports whether a rule's resource res covers want.
func resourceMatches(res, want string) bool {
	if res == rbacv1.ResourceAll || res == want {
		return true
	}
	resource, sub, ok := strings.Cut(want, "/")
	if !ok {
		return false
	}
	if s, ok := strings.CutPrefix(res, "*/"); ok && (sub == "*" || s == sub) {
		return true
	}
	return sub == "*" && strings.HasPrefix(res, resource+"/")
}
