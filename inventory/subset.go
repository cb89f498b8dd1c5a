package inventory

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"maps"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	sproutv1alpha1 "github.com/sprout-gitops/sprout/api/sprout/v1alpha1"
	"github.com/sprout-gitops/sprout/cluster"
)

// Stamp sets obj's sproutv1alpha1.AnnotationApplied to the digest of the rest of obj.
// Apply stamps the objects that have no stamp; a caller that keeps desired
// objects from one sync to the next stamps each once, when it is final, and
// Apply trusts that stamp. An object already stamped right is not written
// to.
func Stamp(obj *unstructured.Unstructured) {
	digest := appliedDigest(obj)
	if cluster.Annotation(obj, sproutv1alpha1.AnnotationApplied) == digest {
		return
	}
	if annotations := cluster.OwnStrings(obj, "annotations", 0); annotations != nil {
		annotations[sproutv1alpha1.AnnotationApplied] = digest
	}
}

// appliedDigest digests obj without its sproutv1alpha1.AnnotationApplied,
// reading obj only. Its cluster.AnnotationProof is left out too: the proof
// follows from what the digest holds (identity and origin) under the key,
// so a plan, which holds no key, stamps as the controller does.
func appliedDigest(obj *unstructured.Unstructured) string {
	object := obj.Object
	metadata, _ := obj.Object["metadata"].(map[string]any)
	if annotations, ok := metadata["annotations"].(map[string]any); ok {
		_, stamped := annotations[sproutv1alpha1.AnnotationApplied]
		_, signed := annotations[cluster.AnnotationProof]
		if stamped || signed {
			// A shallow copy down to the annotations, without the stamp.
			annotations = maps.Clone(annotations)
			delete(annotations, sproutv1alpha1.AnnotationApplied)
			delete(annotations, cluster.AnnotationProof)
			metadata := maps.Clone(metadata)
			if len(annotations) == 0 {
				delete(metadata, "annotations")
			} else {
				metadata["annotations"] = annotations
			}
			object = maps.Clone(obj.Object)
			object["metadata"] = metadata
		}
	}
	data, ok := appendJSON(make([]byte, 0, 2048), object)
	if !ok {
		data, _ = json.Marshal(object) // maps marshal with sorted keys
	}
	sum := sha256.Sum256(data)
	return hex.EncodeToString(sum[:12])
}

// covers reports whether every field of desired holds the same value in
// live: then applying desired would change nothing Sprout sets, and no
// request is needed. Fields others set, and fields the server added, do not
// matter. A server that normalises a value (a quantity "1000m" stored as
// "1") makes covers false, which only costs an apply that changes nothing.
func covers(live, desired *unstructured.Unstructured) bool {
	return coversValue(live.Object, desired.Object)
}

func coversValue(live, desired any) bool {
	switch d := desired.(type) {
	case map[string]any:
		l, ok := live.(map[string]any)
		if !ok {
			return false
		}
		for k, dv := range d {
			lv, ok := l[k]
			if !ok {
				if dv == nil {
					continue // a null asks for absence
				}
				return false
			}
			if !coversValue(lv, dv) {
				return false
			}
		}
		return true
	case []any:
		l, ok := live.([]any)
		if !ok || len(l) != len(d) {
			return false
		}
		for i := range d {
			if !coversValue(l[i], d[i]) {
				return false
			}
		}
		return true
	case int64:
		return numberEquals(live, float64(d))
	case float64:
		return numberEquals(live, d)
	default:
		return live == desired
	}
}

func numberEquals(live any, d float64) bool {
	switch l := live.(type) {
	case int64:
		return float64(l) == d
	case float64:
		return l == d
	}
	return false
}
