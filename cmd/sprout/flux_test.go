package main

import (
	"context"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/sprout-gitops/sprout/fixtures"
	"github.com/sprout-gitops/sprout/internal/fluxtest"
	"github.com/sprout-gitops/sprout/sources"
)

// TestRunFollowsAFluxSource: sprout run --source-ref runs the policies of a
// GitRepository's artifact, reports its revision on the PolicySource, keeps
// the last good revision running when an artifact does not match its digest,
// and prunes what a removed policy generated. The poll interval is an hour:
// only the watch on the GitRepository can notice a new artifact.
func TestRunFollowsAFluxSource(t *testing.T) {
	t.Parallel()
	cp := startControlPlane(t)
	fluxtest.InstallCRDs(t, cp.Config)
	client := dynamic.NewForConfigOrDie(cp.Config)
	kube := kubernetes.NewForConfigOrDie(cp.Config)
	srv := fluxtest.NewServer(t)
	policy, err := fixtures.Read("zk-kafka-address", "policy.yaml")
	if err != nil {
		t.Fatal(err)
	}
	publish := func(rev string, entries ...fluxtest.Entry) {
		data := fluxtest.Tarball(t, entries...)
		fluxtest.SetStatus(t, client, "GitRepository", "default", "platform", fluxtest.Status{
			Revision: rev, Digest: fluxtest.Digest(data), URL: srv.Publish("/"+rev+".tar.gz", data), Ready: metav1.ConditionTrue,
		})
	}
	publish("main@sha1:1", fluxtest.Entry{Name: "policies/zk.yaml", Body: string(policy)}, fluxtest.Entry{Name: "README.md", Body: "platform"})
	runSprout(t, writeKubeconfig(t, cp), "--cluster-policies=false",
		"--source-ref", "GitRepository/default/platform", "--source-path", "policies", "--poll-interval", "1h")

	source := sources.ObjectName("flux:GitRepository/default/platform")
	row := func(ctx context.Context) map[string]string {
		return tableRow(ctx, kube, "/apis/sprout.dev/v1alpha1/policysources/"+source)
	}
	configMap := func(ctx context.Context) *corev1.ConfigMap {
		c, err := kube.CoreV1().ConfigMaps("flux-red").Get(ctx, "zk-kafka-address", metav1.GetOptions{})
		if err != nil && !apierrors.IsNotFound(err) {
			t.Log(err)
		}
		if err != nil {
			return nil
		}
		return c
	}
	waitUntil := func(what string, cond func(ctx context.Context) bool) {
		t.Helper()
		if err := wait.PollUntilContextTimeout(context.Background(), 100*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
			return cond(ctx), nil
		}); err != nil {
			t.Fatalf("waiting for %s: %v (PolicySource: %v)", what, err, row(context.Background()))
		}
	}

	waitUntil("the first revision on the PolicySource", func(ctx context.Context) bool {
		r := row(ctx)
		return r["TYPE"] == "flux" && r["URL"] == "GitRepository/default/platform" && r["REVISION"] == "main@sha1:1" && r["POLICIES"] == "1" && r["READY"] == "True"
	})
	if _, err := kube.CoreV1().Namespaces().Create(context.Background(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "flux-red", Labels: map[string]string{"color": "red"}}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	waitUntil("the ConfigMap of the policy from Flux", func(ctx context.Context) bool { return configMap(ctx) != nil })

	other := fluxtest.Tarball(t, fluxtest.Entry{Name: "policies/README.md", Body: "none"})
	fluxtest.SetStatus(t, client, "GitRepository", "default", "platform", fluxtest.Status{
		Revision: "main@sha1:2", Digest: fluxtest.Digest([]byte("something else")), URL: srv.Publish("/bad.tar.gz", other), Ready: metav1.ConditionTrue,
	})
	waitUntil("the digest mismatch on the PolicySource", func(ctx context.Context) bool {
		r := row(ctx)
		return r["READY"] == "False" && r["REVISION"] == "main@sha1:1" && strings.Contains(r["MESSAGE"], "status.artifact.digest")
	})
	if configMap(context.Background()) == nil {
		t.Fatal("the last good revision must keep running")
	}

	publish("main@sha1:3", fluxtest.Entry{Name: "policies/README.md", Body: "none"})
	waitUntil("the revision without the policy", func(ctx context.Context) bool {
		r := row(ctx)
		return r["READY"] == "True" && r["REVISION"] == "main@sha1:3" && r["MESSAGE"] == "main@sha1:3: 0 policies"
	})
	waitUntil("the removed policy's ConfigMap to be pruned", func(ctx context.Context) bool { return configMap(ctx) == nil })
}

func TestSourceRefFlags(t *testing.T) {
	tests := []struct {
		name    string
		refs    []string
		path    string
		want    []string // source names
		wantErr string
	}{
		{name: "two sources", refs: []string{"GitRepository/flux-system/platform", "ocirepository/apps/policies"}, path: "policies",
			want: []string{"flux:GitRepository/flux-system/platform", "flux:OCIRepository/apps/policies"}},
		{name: "no namespace", refs: []string{"GitRepository/platform"}, wantErr: `--source-ref "GitRepository/platform": want <kind>/<namespace>/<name>`},
		{name: "not a source kind", refs: []string{"Kustomization/flux-system/apps"}, wantErr: `kind "Kustomization" is not a Flux source`},
		{name: "twice", refs: []string{"Bucket/a/b", "bucket/a/b"}, wantErr: "--source-ref Bucket/a/b: given twice"},
		{name: "a path alone", path: "policies", wantErr: "--source-path needs a --source-ref"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ro := &sourceFlags{fluxRefs: tt.refs, fluxPath: tt.path}
			srcs, err := ro.fluxSources(&rest.Config{Host: "https://127.0.0.1:1"})
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("error %v, want one with %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			var names []string
			for _, s := range srcs {
				names = append(names, s.Name())
				if s.Spec().Path != tt.path {
					t.Errorf("%s: path %q", s.Name(), s.Spec().Path)
				}
			}
			if strings.Join(names, " ") != strings.Join(tt.want, " ") {
				t.Errorf("sources %v, want %v", names, tt.want)
			}
		})
	}
}
