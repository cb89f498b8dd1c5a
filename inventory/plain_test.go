package inventory

import (
	"reflect"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
)

// plainSeeds are objects of built-in kinds as policies generate them, and
// the values the general conversion alone may take.
var plainSeeds = []string{
	`{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"a","namespace":"n","labels":{"app":"x"},"annotations":{"k":"v"},"ownerReferences":[{"apiVersion":"v1","kind":"Namespace","name":"n","uid":"u","controller":true}]},"data":{"k":"v"}}`,
	`{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"a","namespace":""},"data":{}}`,
	`{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"a"},"binaryData":{"k":"dg=="},"immutable":false}`,
	`{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"a","creationTimestamp":null},"data":{"k":"v"}}`,
	`{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"a"},"data":{"k":null}}`,
	`{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"a","generation":0},"extra":1}`,
	`{"apiVersion":"v1","kind":"Service","metadata":{"name":"s"},"spec":{"ports":[{"port":2181,"protocol":"TCP"}],"type":"ClusterIP"}}`,
	`{"apiVersion":"v1","kind":"Service","metadata":{"name":"s"},"spec":{"ports":[{"port":2181,"targetPort":2181}]}}`,
	`{"apiVersion":"v1","kind":"Service","metadata":{"name":"s"},"spec":{"ports":[{"port":4294967296}]}}`,
	`{"apiVersion":"v1","kind":"Pod","metadata":{"name":"p"},"spec":{"containers":[{"name":"c","image":"i","resources":{"requests":{"cpu":"500m"}}}]}}`,
	`{"apiVersion":"apps/v1","kind":"Deployment","metadata":{"name":"d"},"spec":{"replicas":0,"selector":{"matchLabels":{"a":"b"}},"template":{"metadata":{"labels":{"a":"b"}},"spec":{"containers":[{"name":"c","image":"i","ports":[{"containerPort":80,"name":""}]}]}}}}`,
	`{"apiVersion":"networking.k8s.io/v1","kind":"NetworkPolicy","metadata":{"name":"deny"},"spec":{"podSelector":{},"policyTypes":["Ingress","Egress"]}}`,
	`{"apiVersion":"rbac.authorization.k8s.io/v1","kind":"RoleBinding","metadata":{"name":"rb"},"roleRef":{"apiGroup":"rbac.authorization.k8s.io","kind":"ClusterRole","name":"view"},"subjects":[{"kind":"Group","name":"g","apiGroup":"rbac.authorization.k8s.io"}]}`,
	`{"apiVersion":"v1","kind":"Secret","metadata":{"name":"s"},"type":"Opaque","stringData":{"k":"v"}}`,
	`{"apiVersion":"v1","kind":"ResourceQuota","metadata":{"name":"q"},"spec":{"hard":{"pods":"10"}}}`,
	`{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"a","labels":{"n":1}},"data":{"k":"v"}}`,
	`{"apiVersion":"v1","kind":"ConfigMap","metadata":{"Name":"a"}}`,
	`{"apiVersion":"v1","kind":"Service","metadata":{"name":"s"},"spec":{"ports":[{"port":1.5}]}}`,
}

// checkPlain: what plainInto takes, it takes as the general conversion
// does, and the general check would have sent it as protobuf too.
func checkPlain(t *testing.T, raw []byte) (taken bool) {
	t.Helper()
	obj := &unstructured.Unstructured{}
	if err := obj.UnmarshalJSON(raw); err != nil {
		return false
	}
	plain, err := clientgoscheme.Scheme.New(obj.GroupVersionKind())
	if err != nil {
		return false
	}
	if !plainInto(obj.Object, plain) {
		return false
	}
	general, _ := clientgoscheme.Scheme.New(obj.GroupVersionKind())
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(obj.Object, general); err != nil {
		t.Fatalf("%s: taken plainly, refused by the general conversion: %v", raw, err)
	}
	if !reflect.DeepEqual(plain, general) {
		t.Fatalf("%s: taken plainly as\n%#v\nthe general conversion makes\n%#v", raw, plain, general)
	}
	back, err := runtime.DefaultUnstructuredConverter.ToUnstructured(plain)
	if err != nil || !coversValue(back, obj.Object) {
		t.Fatalf("%s: taken plainly, but converts back to %v (%v)", raw, back, err)
	}
	return true
}

// TestPlainIntoTakesOnlyWhatConvertsExactly: the objects policies generate
// most are converted without apimachinery's converter; what converts with
// loss, or may, is left to it.
func TestPlainIntoTakesOnlyWhatConvertsExactly(t *testing.T) {
	want := []bool{
		true,  // a ConfigMap with labels, annotations, an owner and data
		false, // an empty namespace (omitted) and an empty map
		false, // bytes
		true,  // nulls in a struct ask for absence
		false, // a null in a map
		false, // a zero generation (omitted), a field the type lacks
		true,  // a Service
		false, // an int-or-string
		false, // a port out of int32's range
		false, // a quantity
		false, // a Deployment of 0 replicas: a pointer, but an empty port name
		false, // an empty podSelector
		true,  // a RoleBinding
		true,  // a Secret's stringData
		false, // a quantity in a map
		false, // a number where a string goes
		false, // a key in another case
		false, // a fraction
	}
	for i, raw := range plainSeeds {
		if got := checkPlain(t, []byte(raw)); got != want[i] {
			t.Errorf("%s: taken plainly %v, want %v", raw, got, want[i])
		}
	}
}

func FuzzPlainInto(f *testing.F) {
	for _, s := range plainSeeds {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, raw []byte) { checkPlain(t, raw) })
}
