package inventory

import (
	"bytes"
	"context"
	"io"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"net/http"
	"strings"
	"sync"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// TestCreateBody: a built-in object that converts exactly to its type is
// sent as protobuf, and decodes to what it says; anything else as JSON.
func TestCreateBody(t *testing.T) {
	objects, _ := desiredSet(1)
	configMap := objects[0]
	with := func(base *unstructured.Unstructured, value any, path ...string) *unstructured.Unstructured {
		o := base.DeepCopy()
		if err := unstructured.SetNestedField(o.Object, value, path...); err != nil {
			t.Fatal(err)
		}
		return o
	}
	service := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "v1", "kind": "Service",
		"metadata": map[string]any{"name": "zk", "namespace": "team-red"},
		"spec":     map[string]any{"ports": []any{map[string]any{"port": int64(2181)}}},
	}}
	pod := func(cpu string) *unstructured.Unstructured {
		return &unstructured.Unstructured{Object: map[string]any{
			"apiVersion": "v1", "kind": "Pod",
			"metadata": map[string]any{"name": "p", "namespace": "team-red"},
			"spec": map[string]any{"containers": []any{map[string]any{"name": "c", "image": "i",
				"resources": map[string]any{"requests": map[string]any{"cpu": cpu}}}}},
		}}
	}
	custom := with(configMap, "example.com/v1", "apiVersion")
	for _, c := range []struct {
		name string
		obj  *unstructured.Unstructured
		want string
	}{
		{"a ConfigMap", configMap, runtime.ContentTypeProtobuf},
		{"a Service", service, runtime.ContentTypeProtobuf},
		{"a canonical quantity", pod("500m"), runtime.ContentTypeProtobuf},
		{"a kind client-go does not know", custom, runtime.ContentTypeJSON},
		{"a field the type does not have", with(configMap, "x", "spec", "replicas"), runtime.ContentTypeJSON},
		{"a port out of int32's range", with(service, []any{map[string]any{"port": int64(1) << 32}}, "spec", "ports"), runtime.ContentTypeJSON},
		{"a quantity not in canonical form", pod("1000m"), runtime.ContentTypeJSON},
		{"an empty map", with(configMap, map[string]any{}, "binaryData"), runtime.ContentTypeJSON},
		{"a string where a number goes", with(service, []any{map[string]any{"port": "2181"}}, "spec", "ports"), runtime.ContentTypeJSON},
	} {
		t.Run(c.name, func(t *testing.T) {
			body, contentType, err := createBody(c.obj)
			if err != nil {
				t.Fatal(err)
			}
			if contentType != c.want {
				t.Fatalf("content type %s, want %s", contentType, c.want)
			}
			if contentType == runtime.ContentTypeJSON {
				return
			}
			typed, _, err := protobufCodec.Decode(body, nil, nil)
			if err != nil {
				t.Fatal(err)
			}
			back, err := runtime.DefaultUnstructuredConverter.ToUnstructured(typed)
			if err != nil {
				t.Fatal(err)
			}
			if !coversValue(back, c.obj.Object) {
				t.Errorf("the body decodes to\n%v\nwhich does not hold\n%v", back, c.obj.Object)
			}
			if kind := typed.GetObjectKind().GroupVersionKind(); kind != c.obj.GroupVersionKind() {
				t.Errorf("the body's kind is %v, want %v", kind, c.obj.GroupVersionKind())
			}
		})
	}
}

// TestCreatesAsTheAPIServerTakesThem: through the API server, a ConfigMap's
// create goes as protobuf and makes the object desired, settled from its
// answer, which is the object sent but for what every create sets; a
// Service whose port is out of range goes as JSON and is refused
// as the API server refuses it, instead of being created with another port.
func TestCreatesAsTheAPIServerTakesThem(t *testing.T) {
	ctx := context.Background()
	cfg := rest.CopyConfig(config(t))
	var mu sync.Mutex
	var posted []string
	var sentConfigMap, answerConfigMap []byte
	cfg.Wrap(func(rt http.RoundTripper) http.RoundTripper {
		return roundTripper(func(req *http.Request) (*http.Response, error) {
			if req.Method == http.MethodPost && strings.Contains(req.URL.Path, "/namespaces/bodies/") {
				mu.Lock()
				posted = append(posted, req.Header.Get("Content-Type")+" "+req.Header.Get("Accept"))
				mu.Unlock()
			}
			if req.Method != http.MethodPost || !strings.HasSuffix(req.URL.Path, "/namespaces/bodies/configmaps") {
				return rt.RoundTrip(req)
			}
			// Keep what the ConfigMap's create sent and got.
			body, err := req.GetBody()
			if err != nil {
				return nil, err
			}
			sent, err := io.ReadAll(body)
			if err != nil {
				return nil, err
			}
			res, err := rt.RoundTrip(req)
			if err != nil {
				return nil, err
			}
			got, err := io.ReadAll(res.Body)
			_ = res.Body.Close()
			res.Body = io.NopCloser(bytes.NewReader(got))
			mu.Lock()
			sentConfigMap, answerConfigMap = sent, got
			mu.Unlock()
			return res, err
		})
	})
	a, err := NewApplier(cfg, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	c, err := client.New(config(t), client.Options{})
	if err != nil {
		t.Fatal(err)
	}
	namespace(t, c, "bodies")

	obj := generated("bodies", "zk", map[string]any{"ZK_ADDRESS": "192.168.10.10:2181"})
	cs, err := a.Apply(ctx, []*unstructured.Unstructured{obj.DeepCopy()}, cachedObjects{}, ApplyOptions{Synchronize: true})
	if err != nil || cs.Count(Created) != 1 {
		t.Fatalf("create: %v %+v", err, cs.Changes)
	}
	if cs.Changes[0].ResourceVersion == "" {
		t.Error("the create's answer did not show the object as desired")
	}
	mu.Lock()
	version, ok := madeAsSent(answerConfigMap, sentConfigMap, obj.GroupVersionKind())
	mu.Unlock()
	if !ok || version != cs.Changes[0].ResourceVersion {
		t.Errorf("the answer compared with what was sent: version %q, %v; want %q by the comparison alone", version, ok, cs.Changes[0].ResourceVersion)
	}
	_, live := cached(t, c, obj)
	if !covers(live, obj) {
		t.Errorf("the API server made\n%v\nwhich does not hold\n%v", live.Object, obj.Object)
	}

	service := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "v1", "kind": "Service",
		"metadata": map[string]any{"name": "zk", "namespace": "bodies"},
		"spec":     map[string]any{"ports": []any{map[string]any{"port": int64(1)<<32 + 80}}},
	}}
	Label(service, Origin{Policy: "GeneratingPolicy/handoff", PolicyName: "handoff",
		Trigger: ObjectRef{GVK: schema.GroupVersionKind{Version: "v1", Kind: "Namespace"}, Name: "bodies", UID: "uid-bodies"}})
	cs, err = a.Apply(ctx, []*unstructured.Unstructured{service}, cachedObjects{}, ApplyOptions{Synchronize: true})
	if err == nil || cs.Count(Failed) != 1 {
		t.Fatalf("a port out of range: %v %+v, want refused", err, cs.Changes)
	}
	mu.Lock()
	defer mu.Unlock()
	protobuf, json := runtime.ContentTypeProtobuf+" "+runtime.ContentTypeProtobuf, runtime.ContentTypeJSON+" "+runtime.ContentTypeJSON
	if len(posted) < 2 || posted[0] != protobuf || posted[1] != json {
		t.Errorf("creates posted and accepted %q, want %q then %q", posted, protobuf, json)
	}
}

// TestCreateOfAnObjectThereReadsIt: a create refused because the object is
// there (Sprout's, not cached yet) is read and compared instead, as when
// the cache held it: the refusal's Status is read into its error, which
// names it as already there, and the object needs nothing.
func TestCreateOfAnObjectThereReadsIt(t *testing.T) {
	ctx := context.Background()
	a, err := NewApplier(config(t), nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	c, err := client.New(config(t), client.Options{})
	if err != nil {
		t.Fatal(err)
	}
	namespace(t, c, "there")
	obj := generated("there", "zk", map[string]any{"ZK_ADDRESS": "192.168.10.10:2181"})
	if cs, err := a.Apply(ctx, []*unstructured.Unstructured{obj.DeepCopy()}, cachedObjects{}, ApplyOptions{Synchronize: true}); err != nil || cs.Count(Created) != 1 {
		t.Fatalf("the first create: %v %+v", err, cs.Changes)
	}
	_, err = a.create(ctx, obj.DeepCopy())
	if !apierrors.IsAlreadyExists(err) {
		t.Fatalf("a second create: %v, want already exists", err)
	}
	cs, err := a.Apply(ctx, []*unstructured.Unstructured{obj.DeepCopy()}, cachedObjects{}, ApplyOptions{Synchronize: true})
	if err != nil || cs.Count(Unchanged) != 1 {
		t.Fatalf("applied again, not cached: %v %+v, want unchanged", err, cs.Changes)
	}
}
