package access

// What a role grants, as the access reviews that ask whether an identity
// holds it.

import (
	"strings"

	rbacv1 "k8s.io/api/rbac/v1"
)

// Request is one permission a rule grants, as an access review asks it:
// a verb on a resource (a subresource, a name) of a group, or on a
// non-resource URL (Path).
type Request struct {
	Verb, Group, Resource, Subresource, Name string
	Path                                     string
}

func (q Request) String() string {
	if q.Path != "" {
		return q.Verb + " on URL " + q.Path
	}
	what := q.Resource
	if q.Subresource != "" {
		what += "/" + q.Subresource
	}
	if q.Group != "" {
		what += "." + q.Group
	}
	if q.Name != "" {
		what += " named " + q.Name
	}
	return q.Verb + " on " + what
}

// requestsOf returns every permission rules grant, one access review each,
// in the rules' order and without repeats: each verb on each resource of
// each group (on each of the rule's resourceNames, when it names some),
// and each verb on each URL. Wildcards are passed through as they are: the
// RBAC authorizer matches a requested "*" only by a rule that holds "*",
// so an identity holds "*" only when it holds all of it.
func requestsOf(rules []rbacv1.PolicyRule) []Request {
	var out []Request
	seen := map[Request]bool{}
	add := func(q Request) {
		if !seen[q] {
			seen[q] = true
			out = append(out, q)
		}
	}
	for _, r := range rules {
		for _, verb := range r.Verbs {
			for _, url := range r.NonResourceURLs {
				add(Request{Verb: verb, Path: url})
			}
			for _, group := range r.APIGroups {
				for _, res := range r.Resources {
					resource, sub, _ := strings.Cut(res, "/")
					names := r.ResourceNames
					if len(names) == 0 {
						names = []string{""}
					}
					for _, name := range names {
						add(Request{Verb: verb, Group: group, Resource: resource, Subresource: sub, Name: name})
					}
				}
			}
		}
	}
	return out
}
