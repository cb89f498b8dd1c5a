package main

import (
	"context"
	"crypto/rand"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
)

// proofKeyData is the member of the proof key's Secret that holds the key.
const proofKeyData = "key"

// proofKeyBytes is the size of a key Sprout makes, and the least it takes:
// cluster.MinProofKeyBytes, which the controller checks again.
const proofKeyBytes = 32

// defaultProofKeySecret names the Secret that holds the proof key, in
// Sprout's own namespace.
const defaultProofKeySecret = "sprout-proof-key"

// proofKey returns the key Sprout signs the origin of its objects with
// (cluster.ProofKey), from the Secret namespace/name, which it creates with
// a random key when absent: a key only Sprout holds, for no policy may
// write in Sprout's own namespace, the same across restarts and replicas.
// A Secret another replica created meanwhile is read again.
func proofKey(ctx context.Context, kube kubernetes.Interface, namespace, name string) ([]byte, error) {
	secrets := kube.CoreV1().Secrets(namespace)
	s, err := secrets.Get(ctx, name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		key := make([]byte, proofKeyBytes)
		_, _ = rand.Read(key) // never fails (crypto/rand)
		s, err = secrets.Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: namespace,
			Labels: map[string]string{"app.kubernetes.io/name": "sprout"}},
			Type: corev1.SecretTypeOpaque, Data: map[string][]byte{proofKeyData: key}}, metav1.CreateOptions{})
		if apierrors.IsAlreadyExists(err) {
			s, err = secrets.Get(ctx, name, metav1.GetOptions{})
		}
	}
	if err != nil {
		return nil, fmt.Errorf("--proof-key-secret: Secret %s/%s: %w", namespace, name, err)
	}
	key := s.Data[proofKeyData]
	if len(key) < proofKeyBytes {
		return nil, fmt.Errorf("--proof-key-secret: Secret %s/%s: data.%s has %d bytes, fewer than %d: delete the Secret and Sprout makes a new key",
			namespace, name, proofKeyData, len(key), proofKeyBytes)
	}
	return key, nil
}
