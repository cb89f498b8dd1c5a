package deploy_test

import (
	"context"
	"fmt"
	"maps"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	authorizationv1 "k8s.io/api/authorization/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes"

	"helm.sh/helm/v3/pkg/chart/loader"
	"helm.sh/helm/v3/pkg/chartutil"
	"helm.sh/helm/v3/pkg/engine"
	"helm.sh/helm/v3/pkg/lint"
	"helm.sh/helm/v3/pkg/lint/support"

	"github.com/sprout-gitops/sprout/internal/manifest"
)

const chartDir = "../charts/sprout"

// renderChart renders charts/sprout as `helm template sprout charts/sprout
// -n sprout-system` does with vals (a values file's content): values merged
// over values.yaml and checked against values.schema.json, then every
// template but the partials and NOTES.txt.
func renderChart(vals string) ([]*unstructured.Unstructured, error) {
	chrt, err := loader.Load(chartDir)
	if err != nil {
		return nil, err
	}
	user, err := chartutil.ReadValues([]byte(vals))
	if err != nil {
		return nil, err
	}
	top, err := chartutil.ToRenderValues(chrt, user, chartutil.ReleaseOptions{
		Name: "sprout", Namespace: namespace, Revision: 1, IsInstall: true,
	}, nil)
	if err != nil {
		return nil, err
	}
	files, err := engine.Render(chrt, top)
	if err != nil {
		return nil, err
	}
	var out []*unstructured.Unstructured
	for _, name := range slices.Sorted(maps.Keys(files)) {
		base := name[strings.LastIndex(name, "/")+1:]
		if strings.HasPrefix(base, "_") || base == "NOTES.txt" {
			continue
		}
		objs, err := manifest.Parse([]byte(files[name]))
		if err != nil {
			return nil, err
		}
		out = append(out, objs...)
	}
	return out, nil
}

func mustRender(t *testing.T, vals string) []*unstructured.Unstructured {
	t.Helper()
	objs, err := renderChart(vals)
	if err != nil {
		t.Fatalf("helm template with values %q: %v", vals, err)
	}
	return objs
}

func objectKey(o *unstructured.Unstructured) string {
	return o.GetKind() + "/" + o.GetNamespace() + "/" + o.GetName()
}

// helmLabels are the labels the chart adds to deploy/'s: Helm's and the
// release's, which lets two releases' selectors tell their pods apart.
var helmLabels = []string{"helm.sh/chart", "app.kubernetes.io/instance", "app.kubernetes.io/version", "app.kubernetes.io/managed-by"}

// withoutHelmParts returns a copy of o without what may differ between the
// chart's default render and deploy/: Helm's labels (in selectors too), the
// CRDs' helm.sh/resource-policy annotation, the image's tag (the chart's
// appVersion, deploy/'s placeholder "latest") and the pull policy the chart
// names (Kubernetes' own default for a tagged image).
func withoutHelmParts(o *unstructured.Unstructured) map[string]any {
	c := o.DeepCopy().Object
	for _, path := range [][]string{{"metadata", "labels"}, {"spec", "selector", "matchLabels"}, {"spec", "selector"}, {"spec", "template", "metadata", "labels"}} {
		if labels, ok, _ := unstructured.NestedMap(c, path...); ok {
			for _, l := range helmLabels {
				delete(labels, l)
			}
			_ = unstructured.SetNestedMap(c, labels, path...)
		}
	}
	if annotations, ok, _ := unstructured.NestedMap(c, "metadata", "annotations"); ok {
		delete(annotations, "helm.sh/resource-policy")
		_ = unstructured.SetNestedMap(c, annotations, "metadata", "annotations")
	}
	containers, _, _ := unstructured.NestedSlice(c, "spec", "template", "spec", "containers")
	for _, container := range containers {
		m := container.(map[string]any)
		delete(m, "imagePullPolicy")
		if image, ok := m["image"].(string); ok {
			m["image"] = imageRepository(image)
		}
	}
	if containers != nil {
		_ = unstructured.SetNestedSlice(c, containers, "spec", "template", "spec", "containers")
	}
	return c
}

// imageRepository is image without its tag and digest.
func imageRepository(image string) string {
	image, _, _ = strings.Cut(image, "@")
	if i := strings.LastIndex(image, ":"); i > strings.LastIndex(image, "/") {
		return image[:i]
	}
	return image
}

// TestChartMatchesDeploy: the chart's default render is deploy/ installed
// as the release "sprout" in sprout-system, object by object: the same
// kinds and names, RBAC rules, container arguments, probes, resources and
// security contexts. Only what withoutHelmParts drops may differ, and the
// Namespace, which Helm users create with --create-namespace.
func TestChartMatchesDeploy(t *testing.T) {
	matchesKustomize(t, mustRender(t, ""), build(t), "deploy/")
}

// matchesKustomize holds a render of the chart to what kustomize built
// from dir, as TestChartMatchesDeploy says.
func matchesKustomize(t *testing.T, rendered, built []*unstructured.Unstructured, dir string) {
	t.Helper()
	chart := map[string]*unstructured.Unstructured{}
	for _, o := range rendered {
		if _, dup := chart[objectKey(o)]; dup {
			t.Errorf("the chart renders %s twice", objectKey(o))
		}
		chart[objectKey(o)] = o
	}
	for _, o := range built {
		if o.GetKind() == "Namespace" {
			continue
		}
		got, ok := chart[objectKey(o)]
		delete(chart, objectKey(o))
		if !ok {
			t.Errorf("the chart lacks %s", objectKey(o))
			continue
		}
		if diff := cmp.Diff(withoutHelmParts(o), withoutHelmParts(got)); diff != "" {
			t.Errorf("the chart's %s differs from %s's (-%s +chart; CRDs: run make generate):\n%s", objectKey(o), dir, dir, diff)
		}
	}
	for k := range chart {
		t.Errorf("the chart adds %s, which %s lacks", k, dir)
	}
}

// allValues sets every value that adds an object or a rule.
const allValues = `
crds: {install: false}
serviceMonitor: {enabled: true, labels: {release: prometheus}, interval: 30s}
git:
  url: https://git.example.com/platform/policies.git
  branch: main
  path: policies
  secretRef: {namespace: policies-git, name: git-credentials}
sourceRefs:
- {kind: GitRepository, namespace: flux-system, name: policies}
guards:
  allowedKinds: [ConfigMap, NetworkPolicy.networking.k8s.io]
  allowUnnamedGrants: true
  serviceAccountNamespaces: [platform]
  tenantCPUShare: 0.5
rbac:
  generate:
    configmaps: null
    networkpolicies:
    - apiGroups: [networking.k8s.io]
      resources: [networkpolicies]
      verbs: [get, list, watch, create, patch, delete]
policyExceptions: {enabled: true, namespace: kyverno-exceptions}
extraArgs: [--workers=8]
sharding: {shards: [shard1]}
`

// valueSets are the values TestChartLint and TestChartInstalls try.
var valueSets = []struct{ name, values string }{{"the default values", ""}, {"allValues", allValues}}

// TestChartValues checks what each value renders.
func TestChartValues(t *testing.T) {
	objs := mustRender(t, allValues)
	byKey := map[string]*unstructured.Unstructured{}
	for _, o := range objs {
		byKey[objectKey(o)] = o
	}
	if got := ofKind(objs, "CustomResourceDefinition"); len(got) > 0 {
		t.Errorf("crds.install false renders %d CRDs", len(got))
	}

	sm, ok := byKey["ServiceMonitor/"+namespace+"/sprout"]
	if !ok {
		t.Fatal("serviceMonitor.enabled renders no ServiceMonitor")
	}
	svc := byKey["Service/"+namespace+"/sprout-metrics"]
	port, _, _ := unstructured.NestedSlice(svc.Object, "spec", "ports")
	endpoints, _, _ := unstructured.NestedSlice(sm.Object, "spec", "endpoints")
	if len(endpoints) != 1 || endpoints[0].(map[string]any)["port"] != port[0].(map[string]any)["name"] {
		t.Errorf("the ServiceMonitor's endpoints %v do not name the Service's port %v", endpoints, port)
	}
	selector, _, _ := unstructured.NestedStringMap(sm.Object, "spec", "selector", "matchLabels")
	for k, v := range selector {
		if svc.GetLabels()[k] != v {
			t.Errorf("the ServiceMonitor selects %s=%s, which the Service's labels %v lack", k, v, svc.GetLabels())
		}
	}
	if sm.GetLabels()["release"] != "prometheus" {
		t.Errorf("serviceMonitor.labels missing from %v", sm.GetLabels())
	}

	if _, ok := byKey["ClusterRole//sprout-generate-configmaps"]; ok {
		t.Error("rbac.generate.configmaps: null still renders its ClusterRole")
	}
	role := clusterRole(t, byKey["ClusterRole//sprout-generate-networkpolicies"])
	if role.Labels[aggregateLabel] != "true" {
		t.Errorf("ClusterRole sprout-generate-networkpolicies: labels %v lack %s", role.Labels, aggregateLabel)
	}
	if len(role.Rules) != 1 || !slices.Equal(role.Rules[0].Resources, []string{"networkpolicies"}) {
		t.Errorf("ClusterRole sprout-generate-networkpolicies: rules %v", role.Rules)
	}

	deployment := byKey["Deployment/"+namespace+"/sprout"]
	containers, _, _ := unstructured.NestedSlice(deployment.Object, "spec", "template", "spec", "containers")
	args, _, _ := unstructured.NestedStringSlice(containers[0].(map[string]any), "args")
	for _, want := range []string{
		"--git-url=https://git.example.com/platform/policies.git", "--git-branch=main", "--git-path=policies",
		"--git-secret-ref=policies-git/git-credentials", "--source-ref=GitRepository/flux-system/policies",
		"--allowed-kinds=ConfigMap,NetworkPolicy.networking.k8s.io", "--service-account-namespaces=platform", "--workers=8", "--allow-unnamed-grants",
		"--enable-policy-exceptions", "--exception-namespace=kyverno-exceptions", "--tenant-cpu-share=0.5",
	} {
		if !slices.Contains(args, want) {
			t.Errorf("the container's args %v lack %s", args, want)
		}
	}
	for _, key := range []string{"Role/policies-git/sprout-git-secret", "RoleBinding/policies-git/sprout-git-secret",
		"Role/platform/sprout-impersonate", "RoleBinding/platform/sprout-impersonate"} {
		if _, ok := byKey[key]; !ok {
			t.Errorf("the render lacks %s", key)
		}
	}
}

func clusterRole(t *testing.T, o *unstructured.Unstructured) *rbacv1.ClusterRole {
	t.Helper()
	if o == nil {
		t.Fatal("no such ClusterRole in the render")
	}
	role := &rbacv1.ClusterRole{}
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(o.Object, role); err != nil {
		t.Fatal(err)
	}
	return role
}

// TestChartLint is `helm lint --strict charts/sprout`, with the default
// values and with allValues: a warning fails too.
func TestChartLint(t *testing.T) {
	for _, set := range valueSets {
		user, err := chartutil.ReadValues([]byte(set.values))
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range lint.All(chartDir, user, namespace, true).Messages {
			if m.Severity >= support.WarningSev {
				t.Errorf("%s: helm lint: %s", set.name, m)
			}
		}
	}
}

// TestChartArgsAreSproutFlags runs the sprout binary with the arguments
// the chart gives it, and --help: every flag must exist and its value parse.
func TestChartArgsAreSproutFlags(t *testing.T) {
	binary := filepath.Join(t.TempDir(), "sprout")
	if out, err := exec.Command("go", "build", "-o", binary, "../cmd/sprout").CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	for _, set := range valueSets {
		for _, o := range ofKind(mustRender(t, set.values), "Deployment") {
			containers, _, _ := unstructured.NestedSlice(o.Object, "spec", "template", "spec", "containers")
			args, _, _ := unstructured.NestedStringSlice(containers[0].(map[string]any), "args")
			if out, err := exec.Command(binary, append(args, "--help")...).CombinedOutput(); err != nil {
				t.Errorf("%s: sprout %s: %v\n%s", set.name, strings.Join(args, " "), err, out)
			}
		}
	}
}

// TestChartImage: the tag defaults to the chart's appVersion.
func TestChartImage(t *testing.T) {
	chrt, err := loader.Load(chartDir)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct{ values, want string }{
		{"", "ghcr.io/sprout-gitops/sprout:" + chrt.Metadata.AppVersion},
		{"image: {repository: registry.example.com/sprout, tag: v9.9.9}", "registry.example.com/sprout:v9.9.9"},
		{"image: {tag: v1.0.0, digest: sha256:" + strings.Repeat("a", 64) + "}", "ghcr.io/sprout-gitops/sprout:v1.0.0@sha256:" + strings.Repeat("a", 64)},
	} {
		for _, o := range ofKind(mustRender(t, c.values), "Deployment") {
			containers, _, _ := unstructured.NestedSlice(o.Object, "spec", "template", "spec", "containers")
			if got := containers[0].(map[string]any)["image"]; got != c.want {
				t.Errorf("values %q: image %v, want %s", c.values, got, c.want)
			}
		}
	}
}

// TestChartRefusesBadValues: a bad value fails the render with an error
// naming it.
func TestChartRefusesBadValues(t *testing.T) {
	for _, c := range []struct{ values, field string }{
		{"replicas: -1", "replicas"},
		{"replica: 2", "replica"},
		{"replicas: 2\nleaderElection: {enabled: false}", "leaderElection.enabled"},
		{"sourceRefs: [{kind: HelmRepository, namespace: flux-system, name: charts}]", "sourceRefs"},
		{"rbac: {generate: {all: [{apiGroups: ['*'], resources: ['*'], verbs: [get]}]}}", "/rbac/generate/all/0/resources/0"},
		{"rbac: {generate: {secrets: [{apiGroups: [''], resources: [secrets], verbs: [impersonate]}]}}", "verbs"},
		{"logFormat: xml", "logFormat"},
		{"guards: {evaluationTimeout: soon}", "evaluationTimeout"},
		{"guards: {tenantCPUShare: -1}", "tenantCPUShare"},
		{"serviceAccount: {create: false}", "serviceAccount.name"},
	} {
		_, err := renderChart(c.values)
		if err == nil {
			t.Errorf("values %q: rendered, want an error naming %s", c.values, c.field)
			continue
		}
		if !strings.Contains(err.Error(), c.field) {
			t.Errorf("values %q: the error does not name %s: %v", c.values, c.field, err)
		}
	}
}

// TestChartInstalls applies the chart's default render, then the render of
// allValues over it (an upgrade), to the control plane: every object is
// accepted, the pods meet the namespace's "restricted" Pod Security
// Standard, and the rights given through values reach Sprout's
// ServiceAccount, through aggregation and the Roles, and go no further.
func TestChartInstalls(t *testing.T) {
	ctx := context.Background()
	kube := kubernetes.NewForConfigOrDie(cfg)
	applyForReal(t, ofKind(build(t), "Namespace")...)
	for _, ns := range []string{"policies-git", "platform", "flux-system"} {
		if _, err := kube.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
			t.Fatal(err)
		}
	}
	installServiceMonitorCRD(t)

	a := newApplier(t)
	for _, set := range valueSets {
		objs := mustRender(t, set.values)
		t.Cleanup(func() { uninstall(t, a, objs) })
		slices.SortStableFunc(objs, func(a, b *unstructured.Unstructured) int { return rank(a) - rank(b) })
		for _, o := range objs {
			if err := a.apply(ctx, o, false); err != nil {
				t.Errorf("%s: apply refused: %v", set.name, err)
			}
			if w := a.warnings.take(); len(w) > 0 {
				t.Errorf("%s: %s: warnings: %v", set.name, objectKey(o), w)
			}
		}
	}
	aggregate(t, kube, "sprout")

	var refused []func(context.Context) (bool, error)
	var refusedWhat []string
	for _, c := range []struct {
		attrs   authorizationv1.ResourceAttributes
		allowed bool
	}{
		{authorizationv1.ResourceAttributes{Verb: "create", Group: "networking.k8s.io", Resource: "networkpolicies", Namespace: "team-a"}, true},
		{authorizationv1.ResourceAttributes{Verb: "get", Resource: "secrets", Namespace: "policies-git", Name: "git-credentials"}, true},
		{authorizationv1.ResourceAttributes{Verb: "get", Resource: "secrets", Namespace: "policies-git", Name: "other"}, false},
		{authorizationv1.ResourceAttributes{Verb: "list", Resource: "secrets", Namespace: "policies-git"}, false},
		{authorizationv1.ResourceAttributes{Verb: "impersonate", Resource: "serviceaccounts", Namespace: "platform", Name: "builder"}, true},
		{authorizationv1.ResourceAttributes{Verb: "impersonate", Resource: "serviceaccounts", Namespace: "kube-system", Name: "builder"}, false},
	} {
		may := func(ctx context.Context) (bool, error) {
			review := &authorizationv1.SubjectAccessReview{Spec: authorizationv1.SubjectAccessReviewSpec{
				User:               serviceAccount,
				Groups:             []string{"system:serviceaccounts", "system:serviceaccounts:" + namespace, "system:authenticated"},
				ResourceAttributes: &c.attrs,
			}}
			got, err := kube.AuthorizationV1().SubjectAccessReviews().Create(ctx, review, metav1.CreateOptions{})
			return err == nil && got.Status.Allowed, err
		}
		what := fmt.Sprintf("Sprout may %s %s %s/%s", c.attrs.Verb, c.attrs.Resource, c.attrs.Namespace, c.attrs.Name)
		if c.allowed {
			// The authorizer reads Roles from a cache of its own, which
			// catches up with the writes above a moment later.
			poll(t, what, may)
			continue
		}
		refused = append(refused, may)
		refusedWhat = append(refusedWhat, what)
	}
	// Asked once every right granted has reached the authorizer.
	for i, may := range refused {
		if got, err := may(ctx); err != nil || got {
			t.Errorf("%s: %t (%v), want false", refusedWhat[i], got, err)
		}
	}
}

// uninstall deletes what a render installed, but the CRDs, which the
// control plane installed first, so that the other tests find deploy/'s
// objects alone: the chart's Deployment selects its pods by one more label,
// and a Deployment's selector cannot change.
func uninstall(t *testing.T, a *applier, objs []*unstructured.Unstructured) {
	t.Helper()
	for _, o := range objs {
		if o.GetKind() == "CustomResourceDefinition" {
			continue
		}
		r, err := a.Resource(o)
		if err != nil {
			t.Error(err)
			continue
		}
		if err := r.Delete(context.Background(), o.GetName(), metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
			t.Errorf("delete %s: %v", objectKey(o), err)
		}
	}
}
