package v1

import (
	"bytes"
	"encoding/json"
	"reflect"
)

// Flag is a switch written as a bare boolean, as Kyverno's CRDs declare
// skipBackgroundRequests. It also reads the {enabled: bool} object Sprout's
// CRDs declared before they matched Kyverno's, because the API server keeps
// objects stored under the old schema as they are: a policy stored then must
// still run. An object without enabled reads as Kyverno's default, true.
type Flag bool

// UnmarshalJSON reads true, false or the legacy {"enabled": bool}.
func (f *Flag) UnmarshalJSON(data []byte) error {
	var b bool
	if err := json.Unmarshal(data, &b); err == nil {
		*f = Flag(b)
		return nil
	}
	var legacy struct {
		Enabled *bool `json:"enabled"`
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if bytes.HasPrefix(bytes.TrimSpace(data), []byte("{")) && dec.Decode(&legacy) == nil {
		*f = Flag(legacy.Enabled == nil || *legacy.Enabled)
		return nil
	}
	// The type error names the field once encoding/json adds the path.
	return &json.UnmarshalTypeError{Value: jsonKind(data), Type: reflect.TypeFor[bool]()}
}

// jsonKind names the kind of a JSON value as encoding/json does in its errors.
func jsonKind(data []byte) string {
	data = bytes.TrimSpace(data)
	switch {
	case len(data) == 0:
		return "nothing"
	case data[0] == '{':
		return "object"
	case data[0] == '[':
		return "array"
	case data[0] == '"':
		return "string"
	}
	return "number"
}
