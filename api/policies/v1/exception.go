package v1

import (
	"fmt"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"sigs.k8s.io/yaml"

	"github.com/sprout-gitops/sprout/internal/yamlbudget"
)

// PolicyExceptionKind is the kind of a CEL policy exception.
const PolicyExceptionKind = "PolicyException"

// PolicyExceptions is the resource of PolicyException.
var PolicyExceptions = GroupVersion.WithResource("policyexceptions")

// PolicyException excludes, from the policies it names, the triggers that
// satisfy all its match conditions. The shape is Kyverno's, field for field;
// Sprout reads policyRefs, matchConditions, expiresAt and reportResult.
//
// +kubebuilder:object:root=true
// +kubebuilder:resource:path=policyexceptions,scope=Namespaced
type PolicyException struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec PolicyExceptionSpec `json:"spec"`
}

// PolicyExceptionList is a list of PolicyException objects.
//
// +kubebuilder:object:root=true
type PolicyExceptionList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []PolicyException `json:"items"`
}

// PolicyExceptionSpec says which policies an exception applies to and which
// triggers it excepts.
type PolicyExceptionSpec struct {
	// PolicyRefs names the policies the exception applies to, by kind and name.
	PolicyRefs []PolicyRef `json:"policyRefs"`
	// MatchConditions are CEL expressions a trigger must all satisfy to be
	// excepted; with none, every trigger of the policies is.
	// +optional
	MatchConditions []admissionregistrationv1.MatchCondition `json:"matchConditions,omitempty"`
	// Images are container images the exception allows: the policies it
	// names run and read them as exceptions.allowedImages.
	// +optional
	Images []string `json:"images,omitempty"`
	// AllowedValues are values the exception allows: the policies it names
	// run and read them as exceptions.allowedValues.
	// +optional
	AllowedValues []string `json:"allowedValues,omitempty"`
	// ReportResult is how an excepted trigger is reported: skip or pass.
	// +optional
	// +kubebuilder:validation:Enum=skip;pass
	// +kubebuilder:default=skip
	ReportResult string `json:"reportResult,omitempty"`
	// ExpiresAt is when the exception stops applying.
	// +optional
	ExpiresAt *metav1.Time `json:"expiresAt,omitempty"`
	// Properties are the exception's own notes (a reason, a ticket).
	// +optional
	Properties map[string]string `json:"properties,omitempty"`
	// EvaluationMode names the controller in charge of the exception (not read by Sprout).
	// +optional
	EvaluationMode string `json:"evaluationMode,omitempty"`
}

// PolicyRef names a policy by kind and name.
type PolicyRef struct {
	// Name is the policy's name.
	Name string `json:"name"`
	// Kind is the policy's kind.
	Kind string `json:"kind"`
}

// Validate reports what makes the exception unusable, by field path.
func (e *PolicyException) Validate() field.ErrorList {
	var errs field.ErrorList
	refs := field.NewPath("spec", "policyRefs")
	if len(e.Spec.PolicyRefs) == 0 {
		errs = append(errs, field.Required(refs, "an exception names at least one policy"))
	}
	for i, ref := range e.Spec.PolicyRefs {
		if ref.Name == "" {
			errs = append(errs, field.Required(refs.Index(i).Child("name"), ""))
		}
		if ref.Kind == "" {
			errs = append(errs, field.Required(refs.Index(i).Child("kind"), ""))
		}
	}
	if r := e.Spec.ReportResult; r != "" && r != "skip" && r != "pass" {
		errs = append(errs, field.NotSupported(field.NewPath("spec", "reportResult"), r, []string{"skip", "pass"}))
	}
	return errs
}

// Expired reports whether the exception has stopped applying at now.
func (e *PolicyException) Expired(now time.Time) bool {
	return e.Spec.ExpiresAt != nil && now.After(e.Spec.ExpiresAt.Time)
}

// AppliesTo reports whether the exception names p, as Kyverno matches them:
// by kind and name, whatever the namespaces of the two.
func (e *PolicyException) AppliesTo(p Policy) bool {
	for _, ref := range e.Spec.PolicyRefs {
		if ref.Name == p.GetName() && ref.Kind == policyKind(p) {
			return true
		}
	}
	return false
}

func policyKind(p Policy) string {
	if p.IsNamespaced() {
		return NamespacedGeneratingPolicyKind
	}
	return GeneratingPolicyKind
}

// DecodeException decodes one PolicyException from JSON or YAML, at any
// served version, strictly: an unknown field is an error naming its path.
func DecodeException(data []byte) (*PolicyException, error) {
	if err := yamlbudget.Check(data, MaxExpandedDocumentSize); err != nil {
		return nil, err
	}
	var obj map[string]any
	if err := yaml.Unmarshal(data, &obj); err != nil {
		return nil, err
	}
	return ExceptionFromUnstructured(&unstructured.Unstructured{Object: obj})
}

// ExceptionFromUnstructured converts a PolicyException read from the API
// server or a file (any served version) into its Go type, rejecting
// unknown fields.
func ExceptionFromUnstructured(u *unstructured.Unstructured) (*PolicyException, error) {
	name := PolicyExceptionKind + " " + u.GetNamespace() + "/" + u.GetName()
	if _, err := runtimeGroupVersion(u.GetAPIVersion()); err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	e := &PolicyException{}
	if err := runtime.DefaultUnstructuredConverter.FromUnstructuredWithValidation(u.Object, e, true); err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	return e, nil
}
