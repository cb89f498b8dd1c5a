package cluster

import "k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

// OwnStrings makes obj's metadata[field] (labels or annotations) a map of
// its own, a copy of the one it had, and returns it for the caller to set
// keys in; nil when obj's metadata is there but not a map, where nothing
// can be set. It reads the old map as GetLabels does (a null value as "",
// and nothing at all if a value is not a string) and writes what SetLabels
// would, in one copy where GetLabels and SetLabels make two, with room for
// extra more keys. The map written may be shared (a trigger's, copied by
// an expression); the copy never is.
func OwnStrings(obj *unstructured.Unstructured, field string, extra int) map[string]any {
	if obj.Object == nil {
		obj.Object = map[string]any{}
	}
	md, ok := obj.Object["metadata"].(map[string]any)
	if !ok {
		if obj.Object["metadata"] != nil {
			return nil
		}
		md = map[string]any{}
		obj.Object["metadata"] = md
	}
	old, _ := md[field].(map[string]any)
	own := make(map[string]any, len(old)+extra)
	for k, v := range old {
		switch v.(type) {
		case string:
			own[k] = v
		case nil:
			own[k] = ""
		default:
			clear(own) // GetLabels reads no map at all
			md[field] = own
			return own
		}
	}
	md[field] = own
	return own
}

// Annotation returns obj's annotation key without copying its annotations
// ("" when it has none, or it is not a string).
func Annotation(obj *unstructured.Unstructured, key string) string {
	md, _ := obj.Object["metadata"].(map[string]any)
	a, _ := md["annotations"].(map[string]any)
	v, _ := a[key].(string)
	return v
}

// Label returns obj's label key without copying its labels.
func Label(obj *unstructured.Unstructured, key string) string {
	md, _ := obj.Object["metadata"].(map[string]any)
	l, _ := md["labels"].(map[string]any)
	v, _ := l[key].(string)
	return v
}
