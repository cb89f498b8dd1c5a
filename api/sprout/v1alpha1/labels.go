package v1alpha1

import (
	"crypto/sha256"
	"encoding/hex"
	"strings"

	"k8s.io/apimachinery/pkg/util/validation"
)

// Labels Sprout writes on every downstream object. The generate.kyverno.io
// ones are Kyverno's, so `kubectl get -l generate.kyverno.io/policy-name=…`
// keeps working after a move from Kyverno.
const (
	LabelManagedBy        = "app.kubernetes.io/managed-by"
	LabelPolicyName       = "generate.kyverno.io/policy-name"
	LabelPolicyNamespace  = "sprout.dev/policy-namespace"
	LabelTriggerName      = "generate.kyverno.io/trigger-name"
	LabelTriggerNamespace = "generate.kyverno.io/trigger-namespace"
	LabelTriggerUID       = "generate.kyverno.io/trigger-uid"
	LabelTriggerKind      = "generate.kyverno.io/trigger-kind"
	LabelTriggerGroup     = "generate.kyverno.io/trigger-group"
	LabelTriggerVersion   = "generate.kyverno.io/trigger-version"
	LabelSourceUID        = "generate.kyverno.io/source-uid"
	LabelSourceName       = "generate.kyverno.io/source-name"
	LabelSourceNamespace  = "generate.kyverno.io/source-namespace"
	LabelSourceKind       = "generate.kyverno.io/source-kind"
	LabelSourceGroup      = "generate.kyverno.io/source-group"
	LabelSourceVersion    = "generate.kyverno.io/source-version"
	// LabelGeneratedOnDelete marks objects generated from a deleted
	// trigger: they are never pruned for the trigger's absence.
	LabelGeneratedOnDelete = "sprout.dev/generated-on-delete"

	// ManagedBy is the value of LabelManagedBy on Sprout's objects.
	ManagedBy = "sprout"

	// AnnotationPolicy names the policy exactly (Kind/name or
	// Kind/namespace/name): label values are cut at 63 characters, names
	// are not.
	AnnotationPolicy = "sprout.dev/policy"

	// AnnotationChain lists, comma-separated and in order, the policies
	// whose generated objects led to this one's trigger (Kind/name or
	// Kind/namespace/name): its trigger's chain and the trigger's policy.
	// Absent when the trigger is not an object Sprout generated. It counts
	// only where Sprout's managed-fields entry holds it, as the origin's
	// other fields.
	AnnotationChain = "sprout.dev/chain"
)

// AnnotationApplied holds a digest of what Sprout last applied to an object.
// covers alone cannot see a field removed from a policy (the live object
// still has it); a changed digest can, and the apply that follows removes
// the field, since Sprout's field manager owned it.
const AnnotationApplied = "sprout.dev/applied"

// FieldManager is the field manager of every write Sprout makes.
const FieldManager = "sprout"

// hashLength is how many hex digits of SHA-256 end an encoded label value.
const hashLength = 16

// LabelValue returns s when it is a valid label value. Object names may be 253
// characters but label values only 63, and some kinds (ClusterRoles, such as
// system:aggregate-to-admin) allow characters no label value may hold, so any
// other value becomes a stable, still readable encoding: its first 46
// characters with every character outside [-A-Za-z0-9_.] turned into a dash,
// trimmed to start and end in an alphanumeric, then a dash and the first 16
// hex digits of the SHA-256 of the whole value. Selecting by an encoded value
// means encoding the name the same way (docs/labels.md).
func LabelValue(s string) string {
	if validLabelValue(s) {
		return s
	}
	sum := sha256.Sum256([]byte(s))
	hash := hex.EncodeToString(sum[:])[:hashLength]
	// Bytes, not runes: a multi-byte character becomes one dash per byte,
	// as the byte-wise shell recipe in docs/labels.md writes it.
	prefix := []byte(s[:min(len(s), validation.LabelValueMaxLength-hashLength-1)])
	for i, c := range prefix {
		if !isAlphanumeric(c) && c != '-' && c != '_' && c != '.' {
			prefix[i] = '-'
		}
	}
	// Only alphanumerics and these three are left: a label value starts and
	// ends in an alphanumeric.
	trimmed := strings.Trim(string(prefix), "-_.")
	if trimmed == "" {
		return hash
	}
	return trimmed + "-" + hash
}

// validLabelValue reports what validation.IsValidLabelValue does, without
// its regular expression and error list: every generated object's labels
// pass here, and the expression cost more than the rest of the labelling
// (FuzzLabelValue holds the two equal).
func validLabelValue(s string) bool {
	if len(s) > validation.LabelValueMaxLength {
		return false
	}
	if s == "" {
		return true
	}
	if !isAlphanumeric(s[0]) || !isAlphanumeric(s[len(s)-1]) {
		return false
	}
	for i := 1; i < len(s)-1; i++ {
		if c := s[i]; !isAlphanumeric(c) && c != '-' && c != '_' && c != '.' {
			return false
		}
	}
	return true
}

func isAlphanumeric(c byte) bool {
	return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9'
}
