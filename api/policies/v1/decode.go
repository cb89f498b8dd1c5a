package v1

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/yaml"

	"github.com/sprout-gitops/sprout/internal/yamlbudget"
)

// MaxDocumentSize bounds one document of a policy file. YAML dense in nodes
// takes many times its size in memory to decode, and a document of a few MiB
// can take more than Sprout's memory limit (docs/performance.md has the
// figures), so a larger document is refused before it is parsed. A policy is far smaller: the API server stores no object over
// 1.5 MiB. Nesting needs no bound here: the YAML decoder refuses nesting
// deeper than 10,000 (issue #8, item 11).
const MaxDocumentSize = 1 << 20

// MaxExpandedDocumentSize bounds what one document of a policy file may
// expand to through its aliases, in bytes as yamlbudget counts them, before
// the decoder expands them: the decoder's own guard counts values, and an
// anchor naming a long string passes it with gigabytes. It is as much as a
// whole policy file may hold (four documents of MaxDocumentSize), so
// aliases make no document larger than text could.
const MaxExpandedDocumentSize = 4 * MaxDocumentSize

// Decode reads every policy from YAML or JSON (one or several documents).
// Documents of other kinds are an error: a policy file holds policies. Unknown
// fields are an error naming the document and field, so a typo never turns
// into a silently ignored setting. A document over MaxDocumentSize, or
// whose aliases expand it past MaxExpandedDocumentSize, is an error naming
// the document.
func Decode(data []byte) ([]Policy, error) {
	policies, _, err := decode(data, false)
	return policies, err
}

// DecodeWithExceptions is Decode for files that may hold PolicyExceptions
// beside the policies, as a source's revision may.
func DecodeWithExceptions(data []byte) ([]Policy, []*PolicyException, error) {
	return decode(data, true)
}

func decode(data []byte, exceptions bool) ([]Policy, []*PolicyException, error) {
	if err := checkDocumentSizes(data); err != nil {
		return nil, nil, err
	}
	docs := utilyaml.NewYAMLReader(bufio.NewReader(bytes.NewReader(data)))
	var out []Policy
	var excs []*PolicyException
	for i := 0; ; i++ {
		doc, err := docs.Read()
		if err != nil {
			if errors.Is(err, io.EOF) {
				return out, excs, nil
			}
			return nil, nil, fmt.Errorf("document %d: %w", i, err)
		}
		if err := yamlbudget.Check(doc, MaxExpandedDocumentSize); err != nil {
			return nil, nil, fmt.Errorf("document %d: %w", i, err)
		}
		// Strict: a key written twice is an error, never a silent
		// last-one-wins (JSON is YAML, so this reads both).
		raw, err := yaml.YAMLToJSONStrict(doc)
		if err != nil {
			return nil, nil, fmt.Errorf("document %d: %w", i, err)
		}
		if len(bytes.TrimSpace(raw)) == 0 || string(bytes.TrimSpace(raw)) == "null" {
			continue
		}
		if exceptions && kindOf(raw) == PolicyExceptionKind {
			e, err := DecodeException(raw)
			if err != nil {
				return nil, nil, fmt.Errorf("document %d: %w", i, err)
			}
			excs = append(excs, e)
			continue
		}
		p, err := DecodeObject(raw)
		if err != nil {
			return nil, nil, fmt.Errorf("document %d: %w", i, err)
		}
		out = append(out, p)
	}
}

// kindOf is the kind a JSON document declares, "" if it declares none.
func kindOf(raw []byte) string {
	var tm metav1.TypeMeta
	if err := json.Unmarshal(raw, &tm); err != nil {
		return ""
	}
	return tm.Kind
}

// checkDocumentSizes splits data as the YAML decoder does, so the document
// indices in its errors are the decoder's. (A JSON stream without --- lines
// is one document to it.)
func checkDocumentSizes(data []byte) error {
	r := utilyaml.NewYAMLReader(bufio.NewReader(bytes.NewReader(data)))
	for i := 0; ; i++ {
		doc, err := r.Read()
		switch {
		case errors.Is(err, io.EOF):
			return nil
		case err != nil:
			return fmt.Errorf("document %d: %w", i, err)
		case len(doc) > MaxDocumentSize:
			return fmt.Errorf("document %d: %d bytes, more than the %d a policy may have", i, len(doc), MaxDocumentSize)
		}
	}
}

// DecodeObject decodes one policy from JSON or YAML, strictly.
func DecodeObject(data []byte) (Policy, error) {
	if err := yamlbudget.Check(data, MaxExpandedDocumentSize); err != nil {
		return nil, err
	}
	var tm metav1.TypeMeta
	if err := yaml.Unmarshal(data, &tm); err != nil {
		return nil, err
	}
	var obj map[string]any
	if err := yaml.Unmarshal(data, &obj); err != nil {
		return nil, err
	}
	// Through the unstructured converter, so an unknown field is named by
	// its whole path (spec.generate[0].expresion), not only its last key.
	return FromUnstructured(&unstructured.Unstructured{Object: obj})
}

// FromUnstructured converts a policy read from the API server (any served
// version) into its Go type, rejecting unknown fields.
func FromUnstructured(u *unstructured.Unstructured) (Policy, error) {
	p, err := newPolicy(metav1.TypeMeta{APIVersion: u.GetAPIVersion(), Kind: u.GetKind()})
	if err != nil {
		return nil, err
	}
	if err := runtime.DefaultUnstructuredConverter.FromUnstructuredWithValidation(u.Object, p, true); err != nil {
		return nil, fmt.Errorf("%s %s: %w", u.GetKind(), u.GetName(), withFieldPath(u.Object, err))
	}
	return p, nil
}

// withFieldPath names the field of a type mismatch, which the unstructured
// converter does not ("cannot restore struct from: bool"): encoding/json
// reports the whole path, so the object is decoded once more with it.
func withFieldPath(obj map[string]any, err error) error {
	data, jerr := json.Marshal(obj)
	if jerr != nil {
		return err
	}
	p, perr := newPolicy(metav1.TypeMeta{APIVersion: fmt.Sprint(obj["apiVersion"]), Kind: fmt.Sprint(obj["kind"])})
	if perr != nil {
		return err
	}
	var typeErr *json.UnmarshalTypeError
	if errors.As(json.Unmarshal(data, p), &typeErr) && typeErr.Field != "" {
		return fmt.Errorf("%s: %s where %s is wanted", typeErr.Field, typeErr.Value, describeType(typeErr.Type.Kind().String()))
	}
	return err
}

// describeType words a Go kind as a YAML user knows it.
func describeType(kind string) string {
	switch kind {
	case "struct", "map":
		return "an object"
	case "slice", "array":
		return "a list"
	case "string":
		return "a string"
	case "bool":
		return "true or false"
	}
	return "a number"
}

func newPolicy(tm metav1.TypeMeta) (Policy, error) {
	gv, err := runtimeGroupVersion(tm.APIVersion)
	if err != nil {
		return nil, err
	}
	switch {
	case tm.Kind == GeneratingPolicyKind:
		return &GeneratingPolicy{}, nil
	case tm.Kind == NamespacedGeneratingPolicyKind && gv != "v1alpha1":
		return &NamespacedGeneratingPolicy{}, nil
	}
	return nil, fmt.Errorf("kind %q at %s is not a generating policy", tm.Kind, tm.APIVersion)
}

func runtimeGroupVersion(apiVersion string) (string, error) {
	for _, v := range ServedVersions {
		if apiVersion == Group+"/"+v {
			return v, nil
		}
	}
	return "", fmt.Errorf("apiVersion %q is not one of %s/%v", apiVersion, Group, ServedVersions)
}
