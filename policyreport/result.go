package policyreport

import (
	"maps"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
)

// The values of a result's result field Sprout gives, as Kyverno's engine
// for generating policies gives them: it never fails a trigger.
const (
	StatusPass  = "pass"
	StatusSkip  = "skip"
	StatusError = "error"
)

// Source is the source of every result, as Kyverno names generating
// policies in reports.
const Source = "KyvernoGeneratingPolicy"

// The annotations and label of a policy that Kyverno reads into its results.
const (
	AnnotationCategory = "policies.kyverno.io/category"
	AnnotationSeverity = "policies.kyverno.io/severity"
	AnnotationScored   = "policies.kyverno.io/scored"
	// LabelDisabled on a policy keeps its results out of reports.
	LabelDisabled = "reports.kyverno.io/disabled"
)

// Trigger is the object a report is about.
type Trigger struct {
	APIVersion, Kind, Namespace, Name string
	UID                               types.UID
}

// TriggerOf returns the Trigger of object o.
func TriggerOf(o interface {
	GetAPIVersion() string
	GetKind() string
	GetNamespace() string
	GetName() string
	GetUID() types.UID
}) Trigger {
	return Trigger{APIVersion: o.GetAPIVersion(), Kind: o.GetKind(), Namespace: o.GetNamespace(), Name: o.GetName(), UID: o.GetUID()}
}

// Result is one policy's result for one trigger, without its timestamp.
type Result struct {
	// Policy is the policy's name, namespace/name for a namespaced one.
	Policy     string
	Rule       string
	Result     string
	Message    string
	Category   string
	Severity   string
	Scored     bool
	Properties map[string]string
}

// Reported reports whether policy's results go in reports: not when it has
// Kyverno's label that disables them.
func Reported(policy metav1.Object) bool {
	_, disabled := policy.GetLabels()[LabelDisabled]
	return !disabled
}

// PolicyName is how a result names policy: its name, or namespace/name.
func PolicyName(policy metav1.Object) string {
	if ns := policy.GetNamespace(); ns != "" {
		return ns + "/" + policy.GetName()
	}
	return policy.GetName()
}

// Pass is the result of an evaluation that generated objects (or none):
// Kyverno's "policy evaluated successfully", with the policy's evaluated
// auditAnnotations and the objects generated as properties.
func Pass(policy metav1.Object, auditAnnotations map[string]string, generated []*unstructured.Unstructured) *Result {
	props := maps.Clone(auditAnnotations)
	if len(generated) > 0 {
		names := make([]string, 0, len(generated))
		for _, g := range generated {
			names = append(names, resourceInfo(g))
		}
		props = withProperty(props, "generated-resources", strings.Join(names, "; "))
	}
	return newResult(policy, policy.GetName(), StatusPass, "policy evaluated successfully", props)
}

// Error is the result of an evaluation that failed with err.
func Error(policy metav1.Object, err error) *Result {
	return newResult(policy, policy.GetName(), StatusError, "failed to evaluate policy: "+err.Error(), nil)
}

// Excepted is the result of a trigger the exceptions (namespace/name)
// except: skipped, or passed when the exception's reportResult is "pass".
// Like Kyverno, it names the exceptions in the message by namespace/name,
// and by name in the exceptions property.
func Excepted(policy metav1.Object, exceptions []string, status string) *Result {
	verb := "skipped"
	if status == StatusPass {
		verb = "passed"
	} else {
		status = StatusSkip
	}
	names := make([]string, 0, len(exceptions))
	for _, e := range exceptions {
		names = append(names, e[strings.LastIndex(e, "/")+1:])
	}
	props := map[string]string{"exceptions": strings.Join(names, ",")}
	return newResult(policy, "exception", status, "rule is "+verb+" due to policy exception: "+strings.Join(exceptions, ", "), props)
}

func newResult(policy metav1.Object, rule, status, message string, props map[string]string) *Result {
	a := policy.GetAnnotations()
	r := &Result{
		Policy: PolicyName(policy), Rule: rule, Result: status, Message: message,
		Category: a[AnnotationCategory], Severity: severity(a[AnnotationSeverity]), Scored: a[AnnotationScored] != "false",
		Properties: withProperty(props, "process", "admission review"),
	}
	r.Message = overridden(r.Result, r.Message, r.Properties)
	return r
}

// overridden is the message a result's properties give in place of
// Kyverno's: passMessage, skipMessage or errorMessage for its status, then
// message for every status.
func overridden(status, message string, props map[string]string) string {
	if m := props[status+"Message"]; m != "" {
		message = m
	}
	if m := props["message"]; m != "" {
		message = m
	}
	return message
}

func withProperty(props map[string]string, k, v string) map[string]string {
	if props == nil {
		props = map[string]string{}
	}
	props[k] = v
	return props
}

// severity keeps the severities the report's schema allows.
func severity(s string) string {
	switch s {
	case "critical", "high", "medium", "low", "info":
		return s
	}
	return ""
}

// resourceInfo names a generated object as Kyverno's generated-resources
// property does: "group/version, Kind=Kind Name=n Namespace=ns".
func resourceInfo(o *unstructured.Unstructured) string {
	info := o.GroupVersionKind().String() + " Name=" + o.GetName()
	if ns := o.GetNamespace(); ns != "" {
		info += " Namespace=" + ns
	}
	return info
}
