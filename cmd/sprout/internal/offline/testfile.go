package offline

import (
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	kjson "sigs.k8s.io/json"
	"sigs.k8s.io/yaml"

	"github.com/sprout-gitops/sprout/internal/yamlbudget"
)

// kyvernoTest is Kyverno's Test (cli.kyverno.io/v1alpha1) with every field
// Kyverno's CLI accepts, so that a strict decode refuses a typo and no
// valid file. Sprout reads the fields that concern generating policies;
// the others (payloads, targetResources, paramResources, userinfo,
// apiCallResponses, name) are for other kinds of policy, and accepted.
type kyvernoTest struct {
	APIVersion       string            `json:"apiVersion"`
	Kind             string            `json:"kind"`
	Metadata         metav1.ObjectMeta `json:"metadata"`
	Policies         []string          `json:"policies"`
	Resources        []string          `json:"resources"`
	Context          string            `json:"context"`
	ClusterResources []string          `json:"clusterResources"`
	Results          []kyvernoResult   `json:"results"`
	// Exceptions are files of PolicyExceptions.
	Exceptions []string `json:"exceptions"`
	// GlobalContextEntries are the data globalContext.Get reads.
	GlobalContextEntries []kyvernoEntry `json:"globalContextEntries"`
	// Variables names a values file; Values, when set, is one inline and
	// the file is not read, as in Kyverno.
	Variables string         `json:"variables"`
	Values    *kyvernoValues `json:"values"`
	// Checks are kyverno-json assertions on Kyverno's rule responses,
	// which Sprout does not have: each test that holds some fails, rather
	// than passing without them.
	Checks []any `json:"checks"`

	// Accepted, for the policies Sprout does not run.
	Name             string   `json:"name"`
	JSONPayload      string   `json:"jsonPayload"`
	HTTPPayloads     []string `json:"httpPayloads"`
	EnvoyPayloads    []string `json:"envoyPayloads"`
	TargetResources  []string `json:"targetResources"`
	ParamResources   []string `json:"paramResources"`
	UserInfo         string   `json:"userinfo"`
	APICallResponses []any    `json:"apiCallResponses"`
}

// kyvernoValues is Kyverno's values (a test's values, or a values file's
// spec). Generating policies read the labels of the triggers' Namespaces;
// the rest (globalValues, policies, subresources, variables) feeds
// JMESPath variables, which CEL policies do not have.
type kyvernoValues struct {
	NamespaceSelectors []struct {
		Name   string            `json:"name"`
		Labels map[string]string `json:"labels"`
	} `json:"namespaceSelector"`
	Namespaces []corev1.Namespace `json:"namespaces"`

	GlobalValues map[string]any `json:"globalValues"`
	Policies     []struct {
		Name      string `json:"name"`
		Resources []struct {
			Name   string         `json:"name"`
			Values map[string]any `json:"values"`
		} `json:"resources"`
		Rules []struct {
			Name          string           `json:"name"`
			Values        map[string]any   `json:"values"`
			ForeachValues []map[string]any `json:"foreachValues"`
		} `json:"rules"`
	} `json:"policies"`
	Subresources []struct {
		Subresource    metav1.APIResource `json:"subresource"`
		ParentResource metav1.APIResource `json:"parentResource"`
	} `json:"subresources"`
	Variables map[string]string `json:"variables"`
}

type kyvernoResult struct {
	Policy              string   `json:"policy"`
	Rule                string   `json:"rule"`
	Kind                string   `json:"kind"`
	Resources           []string `json:"resources"`
	Result              string   `json:"result"`
	GeneratedResource   string   `json:"generatedResource"`
	CloneSourceResource string   `json:"cloneSourceResource"`
	// ResourceSpecs name resources by kind, namespace and name, in place
	// of resources.
	ResourceSpecs []kyvernoResourceSpec `json:"resourceSpecs"`
	// Deprecated in Kyverno, still read: status for result, resource for
	// resources, namespace for a namespaced policy's.
	Status    string `json:"status"`
	Resource  string `json:"resource"`
	Namespace string `json:"namespace"`

	// Accepted: the kind of policy (Sprout reads it from the policy) and
	// the mutated resources, for policies Sprout does not run.
	IsValidatingAdmissionPolicy bool   `json:"isValidatingAdmissionPolicy"`
	IsMutatingAdmissionPolicy   bool   `json:"isMutatingAdmissionPolicy"`
	IsValidatingPolicy          bool   `json:"isValidatingPolicy"`
	IsDeletingPolicy            bool   `json:"isDeletingPolicy"`
	IsImageValidatingPolicy     bool   `json:"isImageValidatingPolicy"`
	IsGeneratingPolicy          bool   `json:"isGeneratingPolicy"`
	IsMutatingPolicy            bool   `json:"isMutatingPolicy"`
	PatchedResources            string `json:"patchedResources"`
	PatchedResource             string `json:"patchedResource"`
}

// kyvernoResourceSpec names one resource of a result.
type kyvernoResourceSpec struct {
	Group       string `json:"group"`
	Version     string `json:"version"`
	Kind        string `json:"kind"`
	Namespace   string `json:"namespace"`
	Subresource string `json:"subresource"`
	Name        string `json:"name"`
}

// decodeTest reads a kyverno-test.yaml as Kyverno's CLI does: strictly,
// so that a field written wrong (polices:) is an error naming it and the
// file, rather than a test that silently reads nothing.
func decodeTest(file string, data []byte) (kyvernoTest, error) {
	var t kyvernoTest
	if err := yamlbudget.Check(data, yamlbudget.ForText(len(data))); err != nil {
		return t, fmt.Errorf("%s: %w", file, err)
	}
	raw, err := yaml.YAMLToJSONStrict(data)
	if err != nil {
		return t, fmt.Errorf("%s: %w", file, err)
	}
	strict, err := kjson.UnmarshalStrict(raw, &t)
	if err != nil {
		return t, fmt.Errorf("%s: %w", file, err)
	}
	if len(strict) > 0 {
		msgs := make([]string, len(strict))
		for i, e := range strict {
			msgs[i] = e.Error()
		}
		return t, fmt.Errorf("%s: %s (a cli.kyverno.io Test has no such field)", file, strings.Join(msgs, "; "))
	}
	if t.Kind != "" && (t.Kind != "Test" || !strings.HasPrefix(t.APIVersion, "cli.kyverno.io/")) {
		return t, fmt.Errorf("%s: apiVersion %q kind %q is not a cli.kyverno.io Test", file, t.APIVersion, t.Kind)
	}
	return t, nil
}

// named is one resource a result names: its kind ("" for any) and name or
// namespace/name.
type named struct{ kind, name string }

// resourcesOf lists the resources a result names: resources, the
// deprecated resource, and resourceSpecs, each with the result's kind
// unless the spec gives one.
func resourcesOf(r kyvernoResult) []named {
	var out []named
	names := r.Resources
	if len(names) == 0 && r.Resource != "" {
		names = []string{r.Resource}
	}
	for _, n := range names {
		out = append(out, named{r.Kind, n})
	}
	for _, s := range r.ResourceSpecs {
		kind, name := s.Kind, s.Name
		if kind == "" {
			kind = r.Kind
		}
		if s.Namespace != "" {
			name = s.Namespace + "/" + name
		}
		out = append(out, named{kind, name})
	}
	return out
}
