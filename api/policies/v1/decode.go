package v1

import (
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
)

// Decode reads every policy from YAML or JSON (one or several documents).
// Documents of other kinds are an error: a policy file holds policies. Unknown
// fields are an error naming the document and field, so a typo never turns
// into a silently ignored setting.
func Decode(data []byte) ([]Policy, error) {
	dec := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader(data), 4096)
	var out []Policy
	for i := 0; ; i++ {
		var raw runtime.RawExtension
		if err := dec.Decode(&raw); err != nil {
			if errors.Is(err, io.EOF) {
				return out, nil
			}
			return nil, fmt.Errorf("document %d: %w", i, err)
		}
		if len(bytes.TrimSpace(raw.Raw)) == 0 || string(bytes.TrimSpace(raw.Raw)) == "null" {
			continue
		}
		p, err := DecodeObject(raw.Raw)
		if err != nil {
			return nil, fmt.Errorf("document %d: %w", i, err)
		}
		out = append(out, p)
	}
}

// DecodeObject decodes one policy from JSON or YAML, strictly.
func DecodeObject(data []byte) (Policy, error) {
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
