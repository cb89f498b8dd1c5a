package cluster

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/binary"
	"fmt"
	"hash"
	"sync"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"

	sproutv1alpha1 "github.com/sprout-gitops/sprout/api/sprout/v1alpha1"
)

// Managed fields say who wrote each field, but the field manager is a
// parameter of each request and managedFields a field like any other: a
// client that names itself sprout, or writes managedFields outright, is
// taken for Sprout (origin.go). So what makes an object a policy's to
// prune, to claim or to learn its past from, and a trigger one Sprout
// generated, is a proof no client can write: AnnotationProof, a MAC under
// a key only Sprout holds over the object's identity (group, kind,
// namespace, name) and its origin (policy, trigger UID, chain). It is part
// of the desired object, written in the same apply as the rest of it. A
// proof copied onto another object, or kept under a changed origin, does
// not verify. It is checked once, where an object is decoded into a
// cache, and kept as a bool (Object.Proven).

// AnnotationProof holds the proof of an object's origin.
const AnnotationProof = "sprout.dev/proof"

// MinProofKeyBytes is the shortest key a ProofKey takes: HMAC-SHA256's
// block of security.
const MinProofKeyBytes = 32

// proofBytes is how much of the MAC a proof keeps: 128 bits, which no
// client guesses.
const proofBytes = 16

// proofDomain starts every message signed, so that a MAC of this key made
// for anything else never verifies as a proof.
const proofDomain = "sprout.dev/proof/v1"

// ProofKey signs and verifies proofs. Without a key (nil, or never Set)
// it signs nothing and an object's origin is proven, as before proofs,
// by its managed fields alone (OriginWritten): what a controller that
// writes nothing (a plan, a diff) needs, for it holds no key.
type ProofKey struct {
	key  []byte
	macs sync.Pool
	// home is the Secret that holds the key, namespace and name: no
	// policy reads it (KeptIn).
	home [2]string
	// known, for a key still to come (Pending), is closed once Set or
	// Abandon has said what it is; once, as settle makes sure.
	known  chan struct{}
	settle sync.Once
}

// Pending makes k a key still to come: until Set gives it, or Abandon
// says there is none, every question about a proof waits, but those an
// object without Sprout's origin asks, whose answer no key changes. A
// start reads triggers while it asks the cluster for its key. Call it
// before k is used.
func (k *ProofKey) Pending() { k.known = make(chan struct{}) }

// Abandon says that a key still to come will not: the questions waiting
// are answered without one. Set calls it once it holds the key.
func (k *ProofKey) Abandon() {
	if k.known != nil {
		k.settle.Do(func() { close(k.known) })
	}
}

// await waits until k's key is known, if it is still to come.
func (k *ProofKey) await() {
	if k != nil && k.known != nil {
		<-k.known
	}
}

// KeptIn names the Secret that holds the key: policies read Secrets with
// Sprout's rights, and one that read the key could forge proofs.
func (k *ProofKey) KeptIn(namespace, name string) { k.home = [2]string{namespace, name} }

// Holds reports whether the Secret namespace/name holds the key.
func (k *ProofKey) Holds(namespace, name string) bool {
	return k != nil && k.home[1] != "" && k.home == [2]string{namespace, name}
}

// NewProofKey returns a ProofKey with secret as its key, or without one
// for a nil secret.
func NewProofKey(secret []byte) (*ProofKey, error) {
	k := &ProofKey{}
	if secret == nil {
		return k, nil
	}
	return k, k.Set(secret)
}

// Set gives k its key, before any object is signed or decoded with it.
func (k *ProofKey) Set(secret []byte) error {
	if len(secret) < MinProofKeyBytes {
		return fmt.Errorf("the proof key has %d bytes, fewer than %d", len(secret), MinProofKeyBytes)
	}
	if k.known != nil {
		select {
		case <-k.known:
			return fmt.Errorf("the proof key was abandoned")
		default:
		}
	}
	k.key = append([]byte(nil), secret...)
	k.macs.New = func() any { return &macState{h: hmac.New(sha256.New, k.key)} }
	k.Abandon() // known now: the questions waiting are answered with it
	return nil
}

// Keyed reports whether k holds a key, once it is known.
func (k *ProofKey) Keyed() bool {
	k.await()
	return k != nil && k.key != nil
}

// origin is what a proof is made over.
type origin struct {
	gk                        schema.GroupKind
	namespace, name           string
	policy, triggerUID, chain string
}

// macState is one MAC under way: its hash and its message, kept for the
// next, as every object a watch brings is verified.
type macState struct {
	h   hash.Hash
	msg []byte
	sum [sha256.Size]byte
}

// encodedProofBytes is the length of a proof: proofBytes in base64url,
// unpadded.
const encodedProofBytes = (proofBytes*8 + 5) / 6

// mac writes the proof of o into out, encodedProofBytes long.
func (k *ProofKey) mac(o origin, out []byte) {
	m := k.macs.Get().(*macState)
	defer k.macs.Put(m)
	m.msg = m.msg[:0]
	for _, field := range [...]string{proofDomain, o.gk.Group, o.gk.Kind, o.namespace, o.name, o.policy, o.triggerUID, o.chain} {
		// Each field is prefixed with its length: no two origins write the
		// same bytes.
		m.msg = binary.AppendUvarint(m.msg, uint64(len(field)))
		m.msg = append(m.msg, field...)
	}
	m.h.Reset()
	m.h.Write(m.msg)
	base64.RawURLEncoding.Encode(out, m.h.Sum(m.sum[:0])[:proofBytes])
}

// Sign writes into obj, a desired object labelled with its origin, the
// proof of its identity and origin. An object without a policy
// annotation, or a k without a key, gets none.
func (k *ProofKey) Sign(obj *unstructured.Unstructured) {
	policy := Annotation(obj, sproutv1alpha1.AnnotationPolicy)
	if !k.Keyed() || policy == "" {
		return
	}
	proof := make([]byte, encodedProofBytes)
	k.mac(origin{gk: KindOf(obj).GroupKind(), namespace: obj.GetNamespace(), name: obj.GetName(),
		policy: policy, triggerUID: Label(obj, sproutv1alpha1.LabelTriggerUID), chain: Annotation(obj, sproutv1alpha1.AnnotationChain)}, proof)
	OwnStrings(obj, "annotations", 0)[AnnotationProof] = string(proof)
}

// proves reports whether proof, an object's AnnotationProof, proves o, of
// an object that carries the managed-by label (managedBy). Without a key,
// written (OriginWritten) is the answer.
func (k *ProofKey) proves(proof string, o origin, managedBy, written bool) bool {
	if o.policy == "" && !written {
		return false // with a key or without: asked of most triggers, it does not wait
	}
	if !k.Keyed() {
		return written
	}
	if !managedBy || o.policy == "" || len(proof) != encodedProofBytes {
		return false
	}
	var want [encodedProofBytes]byte
	k.mac(o, want[:])
	return hmac.Equal([]byte(proof), want[:])
}
