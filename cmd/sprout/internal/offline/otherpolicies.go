package offline

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"

	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/yaml"

	apiv1 "github.com/sprout-gitops/sprout/api/policies/v1"
	"github.com/sprout-gitops/sprout/internal/yamlbudget"
	"github.com/sprout-gitops/sprout/sources"
)

// otherPolicyKinds are the kinds of policy Kyverno's CLI runs and Sprout
// does not, by API group: a kyverno-test.yaml may list them beside its
// generating policies, as kyverno test runs every kind.
var otherPolicyKinds = map[string][]string{
	"kyverno.io": {"ClusterPolicy", "Policy", "CleanupPolicy", "ClusterCleanupPolicy"},
	"admissionregistration.k8s.io": {"ValidatingAdmissionPolicy", "ValidatingAdmissionPolicyBinding",
		"MutatingAdmissionPolicy", "MutatingAdmissionPolicyBinding"},
	apiv1.Group: {"ValidatingPolicy", "NamespacedValidatingPolicy", "ImageValidatingPolicy", "NamespacedImageValidatingPolicy",
		"MutatingPolicy", "NamespacedMutatingPolicy", "DeletingPolicy", "NamespacedDeletingPolicy"},
}

// otherPolicies are the policies of a test Sprout does not run, by the
// names results give them (name, and namespace/name for a namespaced one):
// each says its kind.
type otherPolicies map[string]string

// readTestPolicies reads a test's policy files as ReadPolicies does, but
// passes over the documents of otherPolicyKinds, which it returns by name,
// rather than failing the whole test on them.
func readTestPolicies(paths []string) ([]apiv1.Policy, []sources.Exception, otherPolicies, error) {
	others := otherPolicies{}
	out, exceptions, err := readPolicies(paths, func(data []byte) ([]byte, error) { return takeOtherPolicies(data, others) })
	return out, exceptions, others, err
}

// takeOtherPolicies records the documents of data that are policies of
// otherPolicyKinds in others and returns data with each of them emptied,
// so that the document numbers in later errors stay those of the file.
func takeOtherPolicies(data []byte, others otherPolicies) ([]byte, error) {
	docs := utilyaml.NewYAMLReader(bufio.NewReader(bytes.NewReader(data)))
	var kept [][]byte
	for i := 0; ; i++ {
		doc, err := docs.Read()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return nil, fmt.Errorf("document %d: %w", i, err)
		}
		var head struct {
			APIVersion string `json:"apiVersion"`
			Kind       string `json:"kind"`
			Metadata   struct {
				Name      string `json:"name"`
				Namespace string `json:"namespace"`
			} `json:"metadata"`
		}
		// A document too large, or that its aliases would expand too far,
		// is left for the decoder to refuse, before it is parsed here.
		bounded := len(doc) <= apiv1.MaxDocumentSize && yamlbudget.Check(doc, apiv1.MaxExpandedDocumentSize) == nil
		if bounded && yaml.Unmarshal(doc, &head) == nil && isOtherPolicy(head.APIVersion, head.Kind) {
			others[head.Metadata.Name] = head.Kind
			if head.Metadata.Namespace != "" {
				others[head.Metadata.Namespace+"/"+head.Metadata.Name] = head.Kind
			}
			doc = nil
		}
		kept = append(kept, doc)
	}
	return bytes.Join(kept, []byte("\n---\n")), nil
}

// isOtherPolicy reports whether apiVersion and kind are one of
// otherPolicyKinds.
func isOtherPolicy(apiVersion, kind string) bool {
	group, _, found := strings.Cut(apiVersion, "/")
	if !found {
		return false
	}
	return slices.Contains(otherPolicyKinds[group], kind)
}
