package cluster

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	k8sruntime "k8s.io/apimachinery/pkg/runtime"

	sproutv1alpha1 "github.com/sprout-gitops/sprout/api/sprout/v1alpha1"
)

// proofKey is a key for the tests, or another one.
func proofKey(t *testing.T, b byte) *ProofKey {
	t.Helper()
	k, err := NewProofKey(bytes.Repeat([]byte{b}, MinProofKeyBytes))
	if err != nil {
		t.Fatal(err)
	}
	return k
}

// everyForm returns the Object a cache under k makes of obj in each of
// its forms: of a list's maps, of a watch's JSON, of a protobuf watch's
// typed object, and as a trigger.
func everyForm(t *testing.T, k *ProofKey, obj *unstructured.Unstructured) map[string]*Object {
	t.Helper()
	typed := &corev1.ConfigMap{}
	if err := k8sruntime.DefaultUnstructuredConverter.FromUnstructured(obj.Object, typed); err != nil {
		t.Fatal(err)
	}
	fromProtobuf, err := Generated(nil).WithProof(k).identityOf(typed)
	if err != nil {
		t.Fatal(err)
	}
	raw, err := json.Marshal(obj.Object)
	if err != nil {
		t.Fatal(err)
	}
	fromJSON, err := Generated(nil).WithProof(k).FromJSON(bytes.Clone(raw))
	if err != nil {
		t.Fatal(err)
	}
	trigger, err := Triggers.WithProof(k).FromJSON(raw)
	if err != nil {
		t.Fatal(err)
	}
	fromMaps, err := Generated(nil).WithProof(k).FromList(watched(t, obj))
	if err != nil {
		t.Fatal(err)
	}
	return map[string]*Object{"maps": fromMaps, "JSON": fromJSON, "typed": fromProtobuf, "trigger": trigger}
}

// provenEverywhere returns whether obj is proven under k in each form a
// cache makes an Object of it (everyForm).
func provenEverywhere(t *testing.T, k *ProofKey, obj *unstructured.Unstructured) map[string]bool {
	t.Helper()
	proven := map[string]bool{}
	for how, o := range everyForm(t, k, obj) {
		proven[how] = o.Proven()
	}
	return proven
}

// TestProofProvesIdentityAndOrigin: an object Sprout signed is proven in
// every form a cache makes of it, whoever its managed fields name. A proof
// copied onto another object, kept under a changed trigger, policy or
// chain, checked under another key, or on an object without the
// managed-by label, proves nothing; nor do managed fields forged as
// Sprout's without a proof, once Sprout holds a key.
func TestProofProvesIdentityAndOrigin(t *testing.T) {
	key := proofKey(t, 1)
	signed := func() *unstructured.Unstructured {
		obj := appliedConfigMap()
		labels := obj.GetLabels()
		labels[sproutv1alpha1.LabelTriggerUID] = "t1"
		obj.SetLabels(labels)
		annotations := obj.GetAnnotations()
		annotations[sproutv1alpha1.AnnotationChain] = "GeneratingPolicy/a"
		obj.SetAnnotations(annotations)
		obj.SetManagedFields([]metav1.ManagedFieldsEntry{managedBy("kubectl", metav1.ManagedFieldsOperationApply, originFieldsV1)})
		key.Sign(obj)
		return obj
	}
	setLabel := func(k, v string) func(*unstructured.Unstructured) {
		return func(o *unstructured.Unstructured) {
			l := o.GetLabels()
			l[k] = v
			o.SetLabels(l)
		}
	}
	setAnnotation := func(k, v string) func(*unstructured.Unstructured) {
		return func(o *unstructured.Unstructured) {
			a := o.GetAnnotations()
			a[k] = v
			o.SetAnnotations(a)
		}
	}
	for _, tt := range []struct {
		name string
		key  *ProofKey
		edit func(*unstructured.Unstructured)
		want bool
	}{
		{"signed", key, nil, true},
		{"copied onto another name", key, func(o *unstructured.Unstructured) { o.SetName("theirs") }, false},
		{"copied into another namespace", key, func(o *unstructured.Unstructured) { o.SetNamespace("team-blue") }, false},
		{"copied onto another kind", key, func(o *unstructured.Unstructured) { o.SetKind("Secret") }, false},
		{"another trigger", key, setLabel(sproutv1alpha1.LabelTriggerUID, "t2"), false},
		{"another policy", key, setAnnotation(sproutv1alpha1.AnnotationPolicy, "GeneratingPolicy/other"), false},
		{"another chain", key, setAnnotation(sproutv1alpha1.AnnotationChain, ""), false},
		{"without the managed-by label", key, func(o *unstructured.Unstructured) {
			l := o.GetLabels()
			delete(l, sproutv1alpha1.LabelManagedBy)
			o.SetLabels(l)
		}, false},
		{"a guessed proof", key, setAnnotation(AnnotationProof, "AAAAAAAAAAAAAAAAAAAAAA"), false},
		{"another key", proofKey(t, 2), nil, false},
		{"managed fields forged as Sprout's, no proof", key, func(o *unstructured.Unstructured) {
			a := o.GetAnnotations()
			delete(a, AnnotationProof)
			o.SetAnnotations(a)
			o.SetManagedFields([]metav1.ManagedFieldsEntry{managedBy(sproutv1alpha1.FieldManager, metav1.ManagedFieldsOperationApply, originFieldsV1)})
		}, false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			obj := signed()
			if tt.edit != nil {
				tt.edit(obj)
			}
			for how, got := range provenEverywhere(t, tt.key, obj) {
				if got != tt.want {
					t.Errorf("from %s: proven %v, want %v", how, got, tt.want)
				}
			}
		})
	}
}

// TestAPendingKeyAnswersWithTheKey: a key still to come (Pending) answers
// every question as the key will, once Set gives it, and as no key does
// once abandoned. An object without Sprout's origin, most triggers, is
// answered at once: a start decodes them while it asks for its key.
func TestAPendingKeyAnswersWithTheKey(t *testing.T) {
	secret := bytes.Repeat([]byte{1}, MinProofKeyBytes)
	signed := appliedConfigMap()
	// Managed fields that do not say Sprout wrote the origin: without a
	// key it is not proven, with one its proof proves it.
	signed.SetManagedFields([]metav1.ManagedFieldsEntry{managedBy("kubectl", metav1.ManagedFieldsOperationApply, originFieldsV1)})
	proofKey(t, 1).Sign(signed)
	raw, err := json.Marshal(signed.Object)
	if err != nil {
		t.Fatal(err)
	}
	plain := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "v1", "kind": "ConfigMap",
		"metadata": map[string]any{"name": "plain", "namespace": "team-red", "uid": "u2"}}}

	pending, _ := NewProofKey(nil)
	pending.Pending()
	for how, proven := range provenEverywhere(t, pending, plain) { // would wait for ever
		if proven {
			t.Errorf("a plain object from %s: proven", how)
		}
	}
	answer := make(chan bool, 1)
	go func() {
		o, err := Triggers.WithProof(pending).FromJSON(bytes.Clone(raw))
		answer <- err == nil && o.Proven()
	}()
	if err := pending.Set(secret); err != nil {
		t.Fatal(err)
	}
	if !<-answer {
		t.Error("a signed trigger decoded while the key was pending: not proven, want the key's answer")
	}
	for how, proven := range provenEverywhere(t, pending, signed) {
		if !proven {
			t.Errorf("a signed object from %s, once the key is set: not proven", how)
		}
	}

	abandoned, _ := NewProofKey(nil)
	abandoned.Pending()
	abandoned.Abandon()
	for how, proven := range provenEverywhere(t, abandoned, signed) {
		if proven {
			t.Errorf("a signed object from %s under an abandoned key: proven, want the answer without a key", how)
		}
	}
	if abandoned.Set(secret) == nil {
		t.Error("an abandoned key was set")
	}
}

// TestWithoutAKeyManagedFieldsProve: a ProofKey without a key (what a
// plan or a diff runs with) signs nothing and takes an origin Sprout's
// managed fields wrote for proven, as before proofs.
func TestWithoutAKeyManagedFieldsProve(t *testing.T) {
	var none *ProofKey
	obj := appliedConfigMap()
	obj.SetManagedFields([]metav1.ManagedFieldsEntry{managedBy(sproutv1alpha1.FieldManager, metav1.ManagedFieldsOperationApply, originFieldsV1)})
	none.Sign(obj)
	if _, ok := obj.GetAnnotations()[AnnotationProof]; ok {
		t.Error("signed without a key")
	}
	for how, got := range provenEverywhere(t, none, obj) {
		if !got {
			t.Errorf("from %s: an origin Sprout's managed fields wrote is not proven without a key", how)
		}
	}
	if _, err := NewProofKey([]byte("short")); err == nil {
		t.Error("a 5-byte key was taken")
	}
}

// TestVerifyingAProofAllocatesNothing: every object a watch brings that
// names a policy is verified, so the check costs no allocation, and a
// proof is as long as its encoding says.
func TestVerifyingAProofAllocatesNothing(t *testing.T) {
	if encodedProofBytes != base64.RawURLEncoding.EncodedLen(proofBytes) {
		t.Fatalf("encodedProofBytes is %d, base64url of %d bytes is %d", encodedProofBytes, proofBytes, base64.RawURLEncoding.EncodedLen(proofBytes))
	}
	key := proofKey(t, 1)
	obj := appliedConfigMap()
	key.Sign(obj)
	o, err := Generated(nil).WithProof(key).FromList(watched(t, obj))
	if err != nil || !o.Proven() {
		t.Fatalf("the signed object is not proven: %v", err)
	}
	proof, at := obj.GetAnnotations()[AnnotationProof], o.origin("")
	if n := testing.AllocsPerRun(100, func() { key.proves(proof, at, true, false) }); n != 0 {
		t.Errorf("verifying a proof allocates %v times", n)
	}
}

// TestOriginWrittenOrProvenIsReadAlikeEverywhere: the readers of an
// object's origin (a decision to write over it, whether it left its
// origin) ask whether Sprout wrote the origin or its proof proves it. A
// protobuf watch does not decode the managed fields of an object whose
// proof proves its origin; the answer is the same in every form, and the
// managed fields are still read where the proof proves nothing.
func TestOriginWrittenOrProvenIsReadAlikeEverywhere(t *testing.T) {
	key := proofKey(t, 1)
	for _, tt := range []struct {
		name              string
		manager           string
		sign              bool
		written, provenOK bool
	}{
		{"signed, written by Sprout", sproutv1alpha1.FieldManager, true, true, true},
		{"signed, origin written by another", "kubectl", true, false, true},
		{"unsigned, written by Sprout", sproutv1alpha1.FieldManager, false, true, false},
		{"unsigned, origin written by another", "kubectl", false, false, false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			obj := appliedConfigMap()
			obj.SetManagedFields([]metav1.ManagedFieldsEntry{managedBy(tt.manager, metav1.ManagedFieldsOperationApply, originFieldsV1)})
			if tt.sign {
				key.Sign(obj)
			}
			forms := everyForm(t, key, obj)
			for _, how := range []string{"typed", "JSON"} {
				o := forms[how]
				if o.Proven() != tt.provenOK || (o.OriginWritten() || o.Proven()) != (tt.written || tt.provenOK) {
					t.Errorf("from %s: proven %v, origin written %v; want proven %v, written or proven %v",
						how, o.Proven(), o.OriginWritten(), tt.provenOK, tt.written || tt.provenOK)
				}
				if !tt.provenOK && o.OriginWritten() != tt.written {
					t.Errorf("from %s without a proof: origin written %v, want %v", how, o.OriginWritten(), tt.written)
				}
			}
		})
	}
}

// BenchmarkProvenWatchEvent measures what a protobuf watch reads of a
// generated object Sprout wrote and signed, its content aside: its
// identity and whether its origin is Sprout's.
func BenchmarkProvenWatchEvent(b *testing.B) {
	key, err := NewProofKey(bytes.Repeat([]byte{1}, MinProofKeyBytes))
	if err != nil {
		b.Fatal(err)
	}
	obj := appliedConfigMap()
	obj.SetManagedFields([]metav1.ManagedFieldsEntry{managedBy(sproutv1alpha1.FieldManager, metav1.ManagedFieldsOperationApply, originFieldsV1)})
	key.Sign(obj)
	typed := &corev1.ConfigMap{}
	if err := k8sruntime.DefaultUnstructuredConverter.FromUnstructured(obj.Object, typed); err != nil {
		b.Fatal(err)
	}
	f := Generated(nil).WithProof(key)
	b.ReportAllocs()
	for b.Loop() {
		if o, err := f.identityOf(typed); err != nil || !o.Proven() {
			b.Fatal("not proven", err)
		}
	}
}
