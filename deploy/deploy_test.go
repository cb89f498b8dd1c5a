package deploy_test

import (
	"context"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	authorizationv1 "k8s.io/api/authorization/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/klog/v2"

	apiv1 "github.com/sprout-gitops/sprout/api/policies/v1"
	sproutv1alpha1 "github.com/sprout-gitops/sprout/api/sprout/v1alpha1"
	"github.com/sprout-gitops/sprout/deploy"
	"github.com/sprout-gitops/sprout/fixtures"
	"github.com/sprout-gitops/sprout/internal/controlplane"
	"github.com/sprout-gitops/sprout/internal/fluxtest"
	"github.com/sprout-gitops/sprout/internal/manifest"
	"github.com/sprout-gitops/sprout/internal/syncbuf"
	"github.com/sprout-gitops/sprout/reconcile"
	"github.com/sprout-gitops/sprout/sources"
)

var cfg *rest.Config

func TestMain(m *testing.M) { controlplane.Main(m, &cfg) }

const (
	namespace      = "sprout-system"
	serviceAccount = "system:serviceaccount:" + namespace + ":sprout"
	// aggregateLabel is the label a ClusterRole carries to add its rules to
	// Sprout's role.
	aggregateLabel = "rbac.sprout.dev/aggregate-to-sprout"
)

// build runs kustomize on this folder in-process, as `kubectl apply -k
// deploy/` does.
func build(t *testing.T) []*unstructured.Unstructured {
	t.Helper()
	return buildAt(t, ".")
}

// ofKind returns the objects of the given kinds, in build order.
func ofKind(objs []*unstructured.Unstructured, kinds ...string) []*unstructured.Unstructured {
	var out []*unstructured.Unstructured
	for _, o := range objs {
		if slices.Contains(kinds, o.GetKind()) {
			out = append(out, o)
		}
	}
	return out
}

// warnings collects the warnings the API server returns (Pod Security
// admission warns about a Deployment whose pods its namespace would refuse).
type warnings struct {
	mu   sync.Mutex
	seen []string
}

func (w *warnings) HandleWarningHeader(_ int, _ string, text string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.seen = append(w.seen, text)
}

func (w *warnings) take() []string {
	w.mu.Lock()
	defer w.mu.Unlock()
	out := w.seen
	w.seen = nil
	return out
}

// applier sends objects with server-side apply under kubectl's field
// manager, as `kubectl apply --server-side` does.
type applier struct {
	*manifest.Applier
	warnings *warnings
}

func newApplier(t *testing.T) *applier {
	t.Helper()
	c := rest.CopyConfig(cfg)
	w := &warnings{}
	c.WarningHandler = w
	a, err := manifest.NewApplier(c)
	if err != nil {
		t.Fatal(err)
	}
	return &applier{Applier: a, warnings: w}
}

func (a *applier) apply(ctx context.Context, obj *unstructured.Unstructured, dryRun bool) error {
	r, err := a.Resource(obj)
	if err != nil {
		return fmt.Errorf("%s/%s: %w", obj.GetKind(), obj.GetName(), err)
	}
	data, err := obj.MarshalJSON()
	if err != nil {
		return err
	}
	opts := metav1.PatchOptions{FieldManager: "kubectl"}
	if dryRun {
		opts.DryRun = []string{metav1.DryRunAll}
	}
	if _, err := r.Patch(ctx, obj.GetName(), types.ApplyPatchType, data, opts); err != nil {
		return fmt.Errorf("%s/%s: %w", obj.GetKind(), obj.GetName(), err)
	}
	return nil
}

// applyForReal applies objects as a cluster administrator.
func applyForReal(t *testing.T, objs ...*unstructured.Unstructured) {
	t.Helper()
	a := newApplier(t)
	for _, o := range objs {
		if err := a.apply(context.Background(), o, false); err != nil {
			t.Fatal(err)
		}
	}
}

func TestKustomizationListsEveryCRD(t *testing.T) {
	crds, err := deploy.CRDs()
	if err != nil {
		t.Fatal(err)
	}
	var want, got []string
	for _, crd := range crds {
		want = append(want, crd.Name)
	}
	for _, o := range ofKind(build(t), "CustomResourceDefinition") {
		got = append(got, o.GetName())
	}
	slices.Sort(want)
	slices.Sort(got)
	if !slices.Equal(want, got) {
		t.Errorf("kustomization.yaml lists the CRDs %v, deploy/crds holds %v", got, want)
	}
}

// TestDryRunApply is `kubectl apply -k deploy/ --server-side --dry-run=server`
// against a real API server: every object must be accepted, and the
// Deployment's pods must meet the namespace's "restricted" Pod Security
// Standard (Pod Security admission warns otherwise).
func TestDryRunApply(t *testing.T) {
	objs := build(t)
	// A dry-run of the Namespace does not create it, and every namespaced
	// object would be refused for want of it: it is applied for real first,
	// and again in the dry run below.
	applyForReal(t, ofKind(objs, "Namespace")...)

	// CRDs first, then the Namespace, as kubectl orders them.
	slices.SortStableFunc(objs, func(a, b *unstructured.Unstructured) int {
		return rank(a) - rank(b)
	})
	a := newApplier(t)
	for _, o := range objs {
		// Client-side `kubectl apply` (no --server-side) keeps the whole
		// object in this annotation, which is limited to 256 KiB: the dry
		// run checks that each object fits.
		withLastApplied, err := lastApplied(o)
		if err != nil {
			t.Fatal(err)
		}
		if err := a.apply(context.Background(), withLastApplied, true); err != nil {
			t.Errorf("dry-run apply refused: %v", err)
		}
		if w := a.warnings.take(); len(w) > 0 {
			t.Errorf("%s/%s: warnings: %v", o.GetKind(), o.GetName(), w)
		}
		if o.GetNamespace() != "" && o.GetNamespace() != namespace {
			t.Errorf("%s/%s is in namespace %q, not %s", o.GetKind(), o.GetName(), o.GetNamespace(), namespace)
		}
	}
	for _, kind := range []string{"CustomResourceDefinition", "Namespace", "ServiceAccount", "ClusterRole", "ClusterRoleBinding", "Role", "RoleBinding", "Deployment", "Service"} {
		if len(ofKind(objs, kind)) == 0 {
			t.Errorf("the build holds no %s", kind)
		}
	}
}

func rank(o *unstructured.Unstructured) int {
	switch o.GetKind() {
	case "CustomResourceDefinition":
		return 0
	case "Namespace":
		return 1
	}
	return 2
}

// lastApplied returns a copy of obj carrying the annotation client-side
// `kubectl apply` writes.
func lastApplied(obj *unstructured.Unstructured) (*unstructured.Unstructured, error) {
	data, err := obj.MarshalJSON()
	if err != nil {
		return nil, err
	}
	out := obj.DeepCopy()
	annotations := out.GetAnnotations()
	if annotations == nil {
		annotations = map[string]string{}
	}
	annotations[corev1.LastAppliedConfigAnnotation] = string(data)
	out.SetAnnotations(annotations)
	return out, nil
}

// TestRolesGrantNoWildcard: no rule of any role grants "*" as verb,
// resource or API group, or any non-resource URL.
func TestRolesGrantNoWildcard(t *testing.T) {
	roles := ofKind(build(t), "ClusterRole", "Role")
	if len(roles) == 0 {
		t.Fatal("the build holds no role")
	}
	for _, o := range roles {
		role := &rbacv1.ClusterRole{} // a Role's fields are a subset
		if err := runtime.DefaultUnstructuredConverter.FromUnstructured(o.Object, role); err != nil {
			t.Fatal(err)
		}
		for i, rule := range role.Rules {
			for field, values := range map[string][]string{"verbs": rule.Verbs, "resources": rule.Resources, "apiGroups": rule.APIGroups} {
				if slices.ContainsFunc(values, func(v string) bool { return strings.Contains(v, "*") }) {
					t.Errorf("%s/%s: rules[%d].%s = %v: a wildcard", o.GetKind(), o.GetName(), i, field, values)
				}
			}
			if len(rule.NonResourceURLs) > 0 {
				t.Errorf("%s/%s: rules[%d] grants non-resource URLs %v", o.GetKind(), o.GetName(), i, rule.NonResourceURLs)
			}
		}
	}
}

// TestServiceAccountIsEnough runs the controller as Sprout's ServiceAccount
// with exactly the deployed RBAC, against the zk-kafka-address example:
// generating, reporting status, recording, emitting Events, reverting drift
// and pruning must all be allowed, and no request may be forbidden.
func TestServiceAccountIsEnough(t *testing.T) {
	ctx := context.Background()
	objs := build(t)
	applyForReal(t, ofKind(objs, "Namespace", "ServiceAccount", "ClusterRole", "ClusterRoleBinding", "Role", "RoleBinding")...)
	kube := kubernetes.NewForConfigOrDie(cfg)
	aggregate(t, kube, "sprout")
	// Applying the base again (an upgrade) leaves the aggregated rules to
	// the aggregation controller: no conflict, nothing taken away.
	applyForReal(t, ofKind(objs, "ClusterRole")...)

	sa := rest.CopyConfig(cfg)
	sa.Impersonate = rest.ImpersonationConfig{UserName: serviceAccount}
	saKube := kubernetes.NewForConfigOrDie(sa)
	// The impersonation holds: what no role grants is refused.
	if _, err := saKube.CoreV1().Secrets("").List(ctx, metav1.ListOptions{}); !apierrors.IsForbidden(err) {
		t.Fatalf("listing Secrets as %s: want forbidden, got %v", serviceAccount, err)
	}

	// A Flux source, read and watched as the ServiceAccount.
	fluxtest.InstallCRDs(t, cfg)
	artifact := fluxtest.Tarball(t, fluxtest.Entry{Name: "policies/README.md", Body: "none yet"})
	fluxtest.SetStatus(t, dynamic.NewForConfigOrDie(cfg), "GitRepository", metav1.NamespaceDefault, "platform", fluxtest.Status{
		Revision: "main@sha1:1", Digest: fluxtest.Digest(artifact), Ready: metav1.ConditionTrue,
		URL: fluxtest.NewServer(t).Publish("/platform.tar.gz", artifact),
	})
	flux := func(c *rest.Config) sources.Source {
		src, err := sources.NewFlux(sources.FluxOptions{Ref: sources.FluxRef{Kind: "GitRepository", Namespace: metav1.NamespaceDefault, Name: "platform"},
			Path: "policies", Client: dynamic.NewForConfigOrDie(c)})
		if err != nil {
			t.Fatal(err)
		}
		return src
	}

	logs := runAs(t, sa, flux)

	admin := dynamic.NewForConfigOrDie(cfg)
	applyFixture(t, "policy.yaml")
	applyFixture(t, "triggers.yaml")

	poll(t, "the ConfigMap generated in team-red", func(ctx context.Context) (bool, error) {
		_, err := kube.CoreV1().ConfigMaps("team-red").Get(ctx, "zk-kafka-address", metav1.GetOptions{})
		return err == nil, ignoreNotFound(err)
	})
	poll(t, "the policy Ready", func(ctx context.Context) (bool, error) {
		st, err := policyStatus(ctx, admin, "zk-kafka-address")
		return err == nil && meta.IsStatusConditionTrue(st.Conditions, reconcile.ConditionReady), err
	})
	// Sprout's own rights suffice, and it may ask.
	poll(t, "the policy's RBACPermissionsGranted true", func(ctx context.Context) (bool, error) {
		st, err := policyStatus(ctx, admin, "zk-kafka-address")
		return err == nil && meta.IsStatusConditionTrue(st.ConditionStatus.Conditions, reconcile.ConditionRBACPermissionsGranted), err
	})
	poll(t, "the policy's PolicyInventory", func(ctx context.Context) (bool, error) {
		_, err := admin.Resource(sproutv1alpha1.PolicyInventories).Get(ctx, "gpol.zk-kafka-address", metav1.GetOptions{})
		return err == nil, ignoreNotFound(err)
	})
	poll(t, "the cluster's PolicySource", func(ctx context.Context) (bool, error) {
		_, err := admin.Resource(sproutv1alpha1.PolicySources).Get(ctx, sources.ClusterSourceName, metav1.GetOptions{})
		return err == nil, ignoreNotFound(err)
	})
	poll(t, "the Flux source's PolicySource Ready", func(ctx context.Context) (bool, error) {
		u, err := admin.Resource(sproutv1alpha1.PolicySources).Get(ctx, sources.ObjectName("flux:GitRepository/default/platform"), metav1.GetOptions{})
		if err != nil {
			return false, ignoreNotFound(err)
		}
		ps := &sproutv1alpha1.PolicySource{}
		if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, ps); err != nil {
			return false, err
		}
		return ps.Status.Revision == "main@sha1:1" && slices.ContainsFunc(ps.Status.Conditions, func(c metav1.Condition) bool {
			return c.Type == reconcile.ConditionReady && c.Status == metav1.ConditionTrue
		}), nil
	})
	// The folder source's revision is announced by an Event: Events go to
	// "default", the namespace of cluster-scoped objects.
	poll(t, "an Event on the folder's PolicySource", func(ctx context.Context) (bool, error) {
		events, err := kube.CoreV1().Events(metav1.NamespaceDefault).List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, err
		}
		return slices.ContainsFunc(events.Items, func(e corev1.Event) bool {
			return e.InvolvedObject.Kind == sproutv1alpha1.PolicySourceKind && e.Reason == reconcile.ReasonRevisionTaken
		}), nil
	})

	// An edit is reverted, by a server-side apply as the ServiceAccount.
	if _, err := kube.CoreV1().ConfigMaps("team-red").Patch(ctx, "zk-kafka-address", types.MergePatchType,
		[]byte(`{"data":{"ZK_ADDRESS":"edited"}}`), metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	poll(t, "the edit reverted", func(ctx context.Context) (bool, error) {
		cm, err := kube.CoreV1().ConfigMaps("team-red").Get(ctx, "zk-kafka-address", metav1.GetOptions{})
		return err == nil && cm.Data["ZK_ADDRESS"] != "edited", err
	})

	// A deleted policy takes its ConfigMap and its record with it.
	if err := admin.Resource(apiv1.GeneratingPolicies).Delete(ctx, "zk-kafka-address", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	poll(t, "the ConfigMap pruned", func(ctx context.Context) (bool, error) {
		_, err := kube.CoreV1().ConfigMaps("team-red").Get(ctx, "zk-kafka-address", metav1.GetOptions{})
		return apierrors.IsNotFound(err), ignoreNotFound(err)
	})
	poll(t, "the PolicyInventory deleted", func(ctx context.Context) (bool, error) {
		_, err := admin.Resource(sproutv1alpha1.PolicyInventories).Get(ctx, "gpol.zk-kafka-address", metav1.GetOptions{})
		return apierrors.IsNotFound(err), ignoreNotFound(err)
	})

	for _, word := range []string{"forbidden", "Forbidden"} {
		if strings.Contains(logs.String(), word) {
			t.Errorf("a request was %s:\n%s", word, logs)
		}
	}
}

// aggregate sets an aggregated ClusterRole's rules to the union of the rules
// of the ClusterRoles its selectors pick. It is what kube-controller-manager's
// clusterrole-aggregation controller does; the test control plane runs no
// controller manager.
func aggregate(t *testing.T, kube kubernetes.Interface, name string) {
	t.Helper()
	ctx := context.Background()
	role, err := kube.RbacV1().ClusterRoles().Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if role.AggregationRule == nil {
		t.Fatalf("ClusterRole %s is not aggregated", name)
	}
	var rules []rbacv1.PolicyRule
	var picked, selectors []string
	for _, sel := range role.AggregationRule.ClusterRoleSelectors {
		s, err := metav1.LabelSelectorAsSelector(&sel)
		if err != nil {
			t.Fatal(err)
		}
		selectors = append(selectors, s.String())
		list, err := kube.RbacV1().ClusterRoles().List(ctx, metav1.ListOptions{LabelSelector: s.String()})
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range list.Items {
			if r.Name == name {
				continue
			}
			picked = append(picked, r.Name)
			for _, rule := range r.Rules {
				if !slices.ContainsFunc(rules, func(x rbacv1.PolicyRule) bool { return apiequality.Semantic.DeepEqual(x, rule) }) {
					rules = append(rules, rule)
				}
			}
		}
	}
	if !slices.Contains(selectors, aggregateLabel+"=true") {
		t.Errorf("ClusterRole %s selects %v, not %s=true", name, selectors, aggregateLabel)
	}
	for _, want := range []string{"sprout-core", "sprout-generate-configmaps"} {
		if !slices.Contains(picked, want) {
			t.Errorf("ClusterRole %s does not aggregate %s (picked %v)", name, want, picked)
		}
	}
	role.Rules = rules
	if _, err := kube.RbacV1().ClusterRoles().Update(ctx, role, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
}

// runAs runs the controller with the client configuration c, on the policies
// of the cluster, of an empty folder and of the extra sources made with c,
// until the test ends. The returned
// log holds the controller's and client-go's (klog) messages.
func runAs(t *testing.T, c *rest.Config, extra ...func(*rest.Config) sources.Source) *syncbuf.Buffer {
	t.Helper()
	logs := &syncbuf.Buffer{}
	log := slog.New(slog.NewTextHandler(logs, nil))
	// Reflectors report a refused list or watch through klog only.
	klog.SetSlogLogger(log)
	opts := reconcile.DefaultOptions()
	opts.Logger = log
	opts.Sources = []sources.Source{
		sources.NewCluster(dynamic.NewForConfigOrDie(c)),
		sources.NewDirectory(t.TempDir(), time.Minute),
	}
	for _, src := range extra {
		opts.Sources = append(opts.Sources, src(c))
	}
	ctrl, err := reconcile.New(c, opts)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- ctrl.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("controller: %v", err)
		}
		klog.ClearLogger()
		if t.Failed() {
			t.Log(logs.String())
		}
	})
	return logs
}

// applyFixture applies a file of the zk-kafka-address example as a cluster
// administrator.
func applyFixture(t *testing.T, file string) {
	t.Helper()
	objs, err := fixtures.Objects("zk-kafka-address", file)
	if err != nil {
		t.Fatal(err)
	}
	applyForReal(t, objs...)
}

// policyStatus reads the status of the GeneratingPolicy name.
func policyStatus(ctx context.Context, client dynamic.Interface, name string) (*apiv1.GeneratingPolicyStatus, error) {
	u, err := client.Resource(apiv1.GeneratingPolicies).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return nil, err
	}
	p, err := apiv1.FromUnstructured(u)
	if err != nil {
		return nil, err
	}
	return p.PolicyStatus(), nil
}

// poll waits, with a bound, until cond holds.
func poll(t *testing.T, what string, cond func(context.Context) (bool, error)) {
	t.Helper()
	if err := wait.PollUntilContextTimeout(context.Background(), 50*time.Millisecond, 30*time.Second, true, cond); err != nil {
		t.Fatalf("waiting for %s: %v", what, err)
	}
}

func ignoreNotFound(err error) error {
	if apierrors.IsNotFound(err) {
		return nil
	}
	return err
}

// borrowingPolicy is a GeneratingPolicy whose author names a powerful
// account in kube-system and generates a ClusterRoleBinding that makes
// them cluster-admin, for every new Namespace labelled borrow=yes.
const borrowingPolicy = `apiVersion: policies.kyverno.io/v1
kind: GeneratingPolicy
metadata:
  name: borrow
  annotations: {"sprout.dev/service-account": "kube-system/powerful"}
spec:
  matchConstraints:
    resourceRules:
    - apiGroups: [""]
      apiVersions: ["v1"]
      operations: ["CREATE"]
      resources: ["namespaces"]
    objectSelector:
      matchLabels: {borrow: "yes"}
  generate:
  - expression: >-
      generator.Apply("", [{"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding",
        "metadata": {"name": "author-is-admin"},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "cluster-admin"},
        "subjects": [{"apiGroup": "rbac.authorization.k8s.io", "kind": "User", "name": "policy-author"}]}])
`

// TestPolicyAuthorCannotBorrowAnAccount: Sprout holding exactly deploy/'s
// rights, a policy author who may only write GeneratingPolicies names a
// cluster-admin ServiceAccount in kube-system. Sprout refuses the policy,
// naming the annotation and the flag, and writes nothing; RBAC would refuse
// the impersonation too, while the "default" account of a tenant's
// namespace, which namespaced policies run as, may be impersonated.
func TestPolicyAuthorCannotBorrowAnAccount(t *testing.T) {
	ctx := context.Background()
	objs := build(t)
	applyForReal(t, ofKind(objs, "Namespace", "ServiceAccount", "ClusterRole", "ClusterRoleBinding", "Role", "RoleBinding")...)
	kube := kubernetes.NewForConfigOrDie(cfg)
	aggregate(t, kube, "sprout")

	// The powerful account, and the author's rights: GeneratingPolicies only.
	if _, err := kube.CoreV1().ServiceAccounts("kube-system").Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "powerful"}}, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
	for _, b := range []*rbacv1.ClusterRoleBinding{
		{ObjectMeta: metav1.ObjectMeta{Name: "powerful"}, RoleRef: rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "cluster-admin"},
			Subjects: []rbacv1.Subject{{Kind: "ServiceAccount", Name: "powerful", Namespace: "kube-system"}}},
		{ObjectMeta: metav1.ObjectMeta{Name: "policy-author"}, RoleRef: rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "policy-author"},
			Subjects: []rbacv1.Subject{{APIGroup: rbacv1.GroupName, Kind: "User", Name: "policy-author"}}},
	} {
		if _, err := kube.RbacV1().ClusterRoleBindings().Create(ctx, b, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
			t.Fatal(err)
		}
	}
	authorRole := &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: "policy-author"}, Rules: []rbacv1.PolicyRule{
		{APIGroups: []string{apiv1.GroupVersion.Group}, Resources: []string{"generatingpolicies"}, Verbs: []string{"get", "create", "patch"}},
	}}
	if _, err := kube.RbacV1().ClusterRoles().Create(ctx, authorRole, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}

	sa := rest.CopyConfig(cfg)
	sa.Impersonate = rest.ImpersonationConfig{UserName: serviceAccount}
	runAs(t, sa)

	author := rest.CopyConfig(cfg)
	author.Impersonate = rest.ImpersonationConfig{UserName: "policy-author"}
	authorApplier, err := manifest.NewApplier(author)
	if err != nil {
		t.Fatal(err)
	}
	policy, err := manifest.Parse([]byte(borrowingPolicy))
	if err != nil {
		t.Fatal(err)
	}
	if err := authorApplier.Apply(ctx, policy...); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = dynamic.NewForConfigOrDie(cfg).Resource(apiv1.GeneratingPolicies).Delete(ctx, "borrow", metav1.DeleteOptions{})
	})
	if _, err := kube.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "borrow-trigger", Labels: map[string]string{"borrow": "yes"}}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}

	admin := dynamic.NewForConfigOrDie(cfg)
	poll(t, "the refusal on the policy", func(ctx context.Context) (bool, error) {
		st, err := policyStatus(ctx, admin, "borrow")
		if err != nil {
			return false, err
		}
		return slices.ContainsFunc(st.Conditions, func(c metav1.Condition) bool {
			return c.Type == reconcile.ConditionReady && c.Status == metav1.ConditionFalse &&
				strings.Contains(c.Message, `metadata.annotations[sprout.dev/service-account]: "kube-system/powerful"`) &&
				strings.Contains(c.Message, "--service-account-namespaces")
		}), nil
	})
	if _, err := kube.RbacV1().ClusterRoleBindings().Get(ctx, "author-is-admin", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Fatalf("the author's ClusterRoleBinding: want none, got %v", err)
	}

	// RBAC holds the same line: Sprout may impersonate "default" of any
	// namespace, and no other account.
	for _, c := range []struct {
		namespace, name string
		allowed         bool
	}{{"kube-system", "powerful", false}, {"kube-system", "namespace-controller", false}, {"team-red", "default", true}} {
		review := &authorizationv1.SubjectAccessReview{Spec: authorizationv1.SubjectAccessReviewSpec{
			User:   serviceAccount,
			Groups: []string{"system:serviceaccounts", "system:serviceaccounts:" + namespace, "system:authenticated"},
			ResourceAttributes: &authorizationv1.ResourceAttributes{
				Verb: "impersonate", Resource: "serviceaccounts", Namespace: c.namespace, Name: c.name,
			},
		}}
		got, err := kube.AuthorizationV1().SubjectAccessReviews().Create(ctx, review, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if got.Status.Allowed != c.allowed {
			t.Errorf("Sprout may impersonate ServiceAccount %s/%s: %t, want %t", c.namespace, c.name, got.Status.Allowed, c.allowed)
		}
	}
}
