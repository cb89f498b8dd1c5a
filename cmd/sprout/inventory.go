package main

import (
	"cmp"
	"context"
	"fmt"
	"io"
	"slices"
	"strings"

	"github.com/spf13/cobra"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/selection"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/discovery/cached/memory"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/metadata"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/restmapper"
	"k8s.io/client-go/tools/pager"

	apiv1 "github.com/sprout-gitops/sprout/api/policies/v1"
	sproutv1alpha1 "github.com/sprout-gitops/sprout/api/sprout/v1alpha1"
	"github.com/sprout-gitops/sprout/inventory"
	"github.com/sprout-gitops/sprout/reconcile"
)

// inventoryOptions configure `sprout inventory`.
type inventoryOptions struct {
	namespace string
	output    string
}

func newInventoryCommand(g *globalFlags) *cobra.Command {
	o := inventoryOptions{}
	cmd := &cobra.Command{
		Use:   "inventory [POLICY]",
		Short: "Show what each policy owns, per trigger, with its sync state",
		Long: `Show, from the cluster, what policies have generated: each policy's PolicyInventory
record (source, revision, Ready, synchronize) and the objects labelled as its own,
grouped by the trigger each was generated for. It evaluates no CEL and writes nothing.

Without POLICY: one row per policy. TRIGGERS and OBJECTS count the triggers and
objects found in the cluster now (kubectl get pinv shows the counts Sprout recorded
at its last sync).

With POLICY: one row per object, under its trigger (Kind/namespace/name, from the
generate.kyverno.io/trigger-* labels), with its STATE:

  synced          the object holds what Sprout last applied to it: the fields its
                  field manager (sprout) still owns digest to the stamp in the
                  sprout.dev/applied annotation. Labels, annotations and fields
                  others added beside Sprout's do not count.
  drifted         another writer changed or removed a field Sprout applied (the
                  field left Sprout's managed fields, or the stamp is gone), or
                  added an item to a list Sprout set. The next sync reverts it.
  orphaned        its trigger is gone: no object of the trigger's kind, in its
                  namespace, has the UID of the generate.kyverno.io/trigger-uid
                  label (deleted, or deleted and created again under its name).
                  The next sync prunes it. An object generated from a trigger's
                  deletion (sprout.dev/generated-on-delete) is never orphaned.
  generated-once  the policy does not synchronize: Sprout created the object once
                  and never updates, reverts or deletes it, so it is not checked.

synced means "as last applied", not "as the policy wants now": a change to the
policy, a trigger or a clone source that Sprout has not synced yet does not show,
nor does a value the API server normalised (a quantity 1000m stored as 1), which
shows as drifted.

POLICY is a GeneratingPolicy's name, GeneratingPolicy/NAME or gpol/NAME; with
-n NAMESPACE, a bare name is a NamespacedGeneratingPolicy's (ngpol/NAME too), and
-n is ignored for GeneratingPolicy/NAME. Without POLICY, -n shows only the
NamespacedGeneratingPolicies of that namespace.

-o json and -o yaml print {"policies": [...]}: each policy with its triggers, each
trigger with its objects and their states (docs/cli.md describes every field).`,
		Example: `  sprout inventory
  sprout inventory zk-kafka-address
  sprout inventory -n team-red copy-settings -o yaml`,
		Args: cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return runInventory(cmd.Context(), cmd.OutOrStdout(), cmd.ErrOrStderr(), g, o, args)
		},
	}
	f := cmd.Flags()
	f.StringVarP(&o.namespace, "namespace", "n", "", "the namespace of a NamespacedGeneratingPolicy; without POLICY, show only those of this namespace")
	f.StringVarP(&o.output, "output", "o", "table", "output format: table, yaml or json")
	return cmd
}

func runInventory(ctx context.Context, out, errOut io.Writer, g *globalFlags, o inventoryOptions, args []string) error {
	if o.output != "table" && o.output != "yaml" && o.output != "json" {
		return fmt.Errorf("--output: %q is not table, yaml or json", o.output)
	}
	var ref *sproutv1alpha1.PolicyReference
	if len(args) == 1 {
		r, err := parsePolicyArg(args[0], o.namespace)
		if err != nil {
			return err
		}
		ref = &r
	}
	cfg, err := g.restConfig()
	if err != nil {
		return err
	}
	c, err := newInventoryReader(cfg)
	if err != nil {
		return err
	}
	records, err := c.records(ctx, ref, o.namespace)
	if err != nil {
		return err
	}
	// The summary table shows no states: it reads no trigger.
	report, err := c.report(ctx, records, ref != nil, ref != nil || o.output != "table")
	if err != nil {
		return err
	}
	if ref != nil {
		return printPolicyInventory(out, errOut, report, o.output)
	}
	return printInventorySummary(out, errOut, report, o.output, o.namespace)
}

// parsePolicyArg reads POLICY as kubectl reads TYPE/NAME: a bare name is a
// GeneratingPolicy's, or a NamespacedGeneratingPolicy's when -n is given.
func parsePolicyArg(arg, namespace string) (sproutv1alpha1.PolicyReference, error) {
	typ, name, typed := strings.Cut(arg, "/")
	if !typed {
		typ, name = "", arg
	}
	if name == "" || strings.Contains(name, "/") {
		return sproutv1alpha1.PolicyReference{}, fmt.Errorf("%q is not NAME or TYPE/NAME", arg)
	}
	kind := apiv1.GeneratingPolicyKind
	switch strings.TrimSuffix(strings.ToLower(typ), ".policies.kyverno.io") {
	case "":
		if namespace != "" {
			kind = apiv1.NamespacedGeneratingPolicyKind
		}
	case "generatingpolicy", "generatingpolicies", "gpol":
	case "namespacedgeneratingpolicy", "namespacedgeneratingpolicies", "ngpol":
		kind = apiv1.NamespacedGeneratingPolicyKind
		if namespace == "" {
			return sproutv1alpha1.PolicyReference{}, fmt.Errorf("%s is namespaced: give its namespace with -n", arg)
		}
	default:
		return sproutv1alpha1.PolicyReference{}, fmt.Errorf("%q is not a GeneratingPolicy or NamespacedGeneratingPolicy", typ)
	}
	ref := sproutv1alpha1.PolicyReference{Kind: kind, Name: name}
	if kind == apiv1.NamespacedGeneratingPolicyKind {
		ref.Namespace = namespace
	}
	return ref, nil
}

// policyID names a policy as the sprout.dev/policy annotation of its objects
// does: Kind/name or Kind/namespace/name.
func policyID(ref sproutv1alpha1.PolicyReference) string {
	if ref.Namespace == "" {
		return ref.Kind + "/" + ref.Name
	}
	return ref.Kind + "/" + ref.Namespace + "/" + ref.Name
}

// inventoryReader reads records, Sprout's objects and triggers.
type inventoryReader struct {
	dynamic  dynamic.Interface
	metadata metadata.Interface
	mapper   meta.RESTMapper
}

func newInventoryReader(cfg *rest.Config) (*inventoryReader, error) {
	cfg = rest.CopyConfig(cfg)
	// kubectl's rate: a policy with many triggers costs a list per namespace.
	cfg.QPS, cfg.Burst = 50, 100
	dyn, err := dynamic.NewForConfig(cfg)
	if err != nil {
		return nil, err
	}
	md, err := metadata.NewForConfig(cfg)
	if err != nil {
		return nil, err
	}
	disc, err := discovery.NewDiscoveryClientForConfig(cfg)
	if err != nil {
		return nil, err
	}
	mapper := restmapper.NewDeferredDiscoveryRESTMapper(memory.NewMemCacheClient(disc))
	return &inventoryReader{dynamic: dyn, metadata: md, mapper: mapper}, nil
}

// records returns the record of the policy ref names, or every record (of
// the policies of namespace, when given), sorted. Shard records are left
// out: they hold only the admitted and generated lists, which the inventory
// does not show.
func (c *inventoryReader) records(ctx context.Context, ref *sproutv1alpha1.PolicyReference, namespace string) ([]*sproutv1alpha1.PolicyInventory, error) {
	client := c.dynamic.Resource(sproutv1alpha1.PolicyInventories)
	if ref != nil {
		name := inventory.RecordName(*ref)
		u, err := client.Get(ctx, name, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return nil, fmt.Errorf("no PolicyInventory for %s", policyID(*ref))
		}
		if err != nil {
			return nil, fmt.Errorf("PolicyInventory %s: read: %w", name, err)
		}
		rec, err := inventory.FromUnstructured(u)
		if err != nil {
			return nil, err
		}
		if got := rec.Spec.Policy; got.Kind != ref.Kind || got.Namespace != ref.Namespace || got.Name != ref.Name {
			// Record names of long policy names are cut and hashed.
			return nil, fmt.Errorf("no PolicyInventory for %s: %s is the record of %s", policyID(*ref), name, policyID(got))
		}
		return []*sproutv1alpha1.PolicyInventory{rec}, nil
	}
	var out []*sproutv1alpha1.PolicyInventory
	err := eachListed(ctx, client, metav1.ListOptions{}, func(u *unstructured.Unstructured) error {
		rec, err := inventory.FromUnstructured(u)
		if err != nil {
			return err
		}
		if rec.Spec.ShardOf == "" && (namespace == "" || rec.Spec.Policy.Namespace == namespace) {
			out = append(out, rec)
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("list PolicyInventories: %w", err)
	}
	slices.SortFunc(out, func(a, b *sproutv1alpha1.PolicyInventory) int {
		x, y := a.Spec.Policy, b.Spec.Policy
		return compareRefs(x.Kind, x.Namespace, x.Name, y.Kind, y.Namespace, y.Name)
	})
	return out, nil
}

// eachListed calls fn for every object of a list, read a page at a time.
func eachListed(ctx context.Context, client dynamic.ResourceInterface, opts metav1.ListOptions, fn func(*unstructured.Unstructured) error) error {
	p := pager.New(pager.SimplePageFunc(func(opts metav1.ListOptions) (runtime.Object, error) {
		return client.List(ctx, opts)
	}))
	return p.EachListItem(ctx, opts, func(obj runtime.Object) error {
		return fn(obj.(*unstructured.Unstructured))
	})
}

// report reads the objects of the records' policies and, with states, their
// triggers, and returns them grouped policy by policy and trigger by trigger.
func (c *inventoryReader) report(ctx context.Context, records []*sproutv1alpha1.PolicyInventory, one, states bool) (inventoryReport, error) {
	owned, err := c.owned(ctx, records, one)
	if err != nil {
		return inventoryReport{}, err
	}
	triggers := &triggerFinder{reader: c, uids: map[triggerScope]map[string]string{}}
	report := inventoryReport{Policies: make([]policyReport, 0, len(records))}
	for _, rec := range records {
		p, err := policyOf(ctx, rec, owned[policyID(rec.Spec.Policy)], triggers, states)
		if err != nil {
			return inventoryReport{}, err
		}
		report.Policies = append(report.Policies, p)
	}
	return report, nil
}

// owned lists Sprout's objects in every resource the records name, by the
// policy their sprout.dev/policy annotation names exactly (labels hold long
// names encoded). One policy's are selected by its labels; for many, each
// resource is listed once with every object Sprout manages in it.
func (c *inventoryReader) owned(ctx context.Context, records []*sproutv1alpha1.PolicyInventory, one bool) (map[string][]*unstructured.Unstructured, error) {
	wanted := map[string]bool{}
	resources := map[schema.GroupVersionResource]bool{}
	for _, rec := range records {
		wanted[policyID(rec.Spec.Policy)] = true
		for _, r := range rec.Spec.Resources {
			resources[schema.GroupVersionResource{Group: r.Group, Version: r.Version, Resource: r.Resource}] = true
		}
	}
	selector := labels.SelectorFromSet(labels.Set{sproutv1alpha1.LabelManagedBy: sproutv1alpha1.ManagedBy})
	if one {
		selector = policySelector(records[0].Spec.Policy)
	}
	out := map[string][]*unstructured.Unstructured{}
	for gvr := range resources {
		err := eachListed(ctx, c.dynamic.Resource(gvr), metav1.ListOptions{LabelSelector: selector.String()}, func(u *unstructured.Unstructured) error {
			if id := u.GetAnnotations()[sproutv1alpha1.AnnotationPolicy]; wanted[id] {
				out[id] = append(out[id], u)
			}
			return nil
		})
		if apierrors.IsNotFound(err) {
			continue // the resource is no longer served: none of its objects is left
		}
		if err != nil {
			return nil, fmt.Errorf("list %s: %w", gvr.GroupResource(), err)
		}
	}
	return out, nil
}

// policySelector selects the objects a policy's labels name: a
// GeneratingPolicy's lack the policy-namespace label, so a namespaced
// policy of the same name is not among them.
func policySelector(ref sproutv1alpha1.PolicyReference) labels.Selector {
	selector := labels.SelectorFromSet(labels.Set{
		sproutv1alpha1.LabelManagedBy:  sproutv1alpha1.ManagedBy,
		sproutv1alpha1.LabelPolicyName: sproutv1alpha1.LabelValue(ref.Name),
	})
	op, values := selection.DoesNotExist, []string(nil)
	if ref.Namespace != "" {
		op, values = selection.Equals, []string{ref.Namespace}
	}
	req, err := labels.NewRequirement(sproutv1alpha1.LabelPolicyNamespace, op, values)
	if err != nil {
		panic(err) // a namespace name is always a valid label value
	}
	return selector.Add(*req)
}

// policyOf builds one policy's report from its record and its objects.
func policyOf(ctx context.Context, rec *sproutv1alpha1.PolicyInventory, objs []*unstructured.Unstructured, triggers *triggerFinder, states bool) (policyReport, error) {
	p := policyReport{
		Kind: rec.Spec.Policy.Kind, Namespace: rec.Spec.Policy.Namespace, Name: rec.Spec.Policy.Name,
		Source: rec.Spec.Source, Revision: rec.Spec.Revision, Ready: string(metav1.ConditionUnknown),
		Synchronize: rec.Spec.Synchronize, Triggers: []triggerReport{},
	}
	if cond := meta.FindStatusCondition(rec.Status.Conditions, reconcile.ConditionReady); cond != nil {
		p.Ready, p.Reason, p.Message = string(cond.Status), cond.Reason, cond.Message
	}
	byTrigger := map[string]int{}
	for _, obj := range objs {
		t := triggerOf(obj)
		key := t.APIVersion + " " + t.Kind + " " + t.Namespace + " " + t.Name + " " + t.UID
		i, ok := byTrigger[key]
		if !ok {
			if states {
				name, exists, err := triggers.find(ctx, t)
				if err != nil {
					return policyReport{}, fmt.Errorf("%s: trigger %s: %w", policyID(rec.Spec.Policy), t.ref(), err)
				}
				t.Name, t.Exists = name, exists
			}
			i = len(p.Triggers)
			byTrigger[key] = i
			p.Triggers = append(p.Triggers, t)
		}
		o := objectReport{APIVersion: obj.GetAPIVersion(), Kind: obj.GetKind(), Namespace: obj.GetNamespace(), Name: obj.GetName()}
		if states {
			state, err := stateOf(rec, obj, p.Triggers[i].Exists)
			if err != nil {
				return policyReport{}, fmt.Errorf("%s: %w", policyID(rec.Spec.Policy), err)
			}
			o.State = state
		}
		p.Triggers[i].Objects = append(p.Triggers[i].Objects, o)
	}
	slices.SortFunc(p.Triggers, func(a, b triggerReport) int {
		return compareRefs(a.Kind, a.Namespace, a.Name, b.Kind, b.Namespace, b.Name)
	})
	for _, t := range p.Triggers {
		slices.SortFunc(t.Objects, func(a, b objectReport) int {
			return compareRefs(a.Kind, a.Namespace, a.Name, b.Kind, b.Namespace, b.Name)
		})
	}
	return p, nil
}

// compareRefs orders by kind, then namespace, then name.
func compareRefs(kind1, namespace1, name1, kind2, namespace2, name2 string) int {
	return cmp.Or(strings.Compare(kind1, kind2), strings.Compare(namespace1, namespace2), strings.Compare(name1, name2))
}

// triggerOf reads an object's trigger from its labels. The name is the
// label's value: encoded when longer than a label value may be, until
// triggerFinder finds the trigger.
func triggerOf(obj *unstructured.Unstructured) triggerReport {
	l := obj.GetLabels()
	return triggerReport{
		APIVersion: schema.GroupVersion{Group: l[sproutv1alpha1.LabelTriggerGroup], Version: l[sproutv1alpha1.LabelTriggerVersion]}.String(),
		Kind:       l[sproutv1alpha1.LabelTriggerKind],
		Namespace:  l[sproutv1alpha1.LabelTriggerNamespace],
		Name:       l[sproutv1alpha1.LabelTriggerName],
		UID:        l[sproutv1alpha1.LabelTriggerUID],
		Objects:    []objectReport{},
	}
}

// stateOf tells an object's sync state, as the command's help defines it.
func stateOf(rec *sproutv1alpha1.PolicyInventory, obj *unstructured.Unstructured, triggerExists bool) (objectState, error) {
	if !rec.Spec.Synchronize {
		return stateGeneratedOnce, nil
	}
	if !triggerExists && obj.GetLabels()[sproutv1alpha1.LabelGeneratedOnDelete] != "true" {
		return stateOrphaned, nil
	}
	drifted, err := inventory.Drifted(obj)
	if err != nil {
		return "", err
	}
	if drifted {
		return stateDrifted, nil
	}
	return stateSynced, nil
}

// triggerScope is where a trigger is looked for: its kind, in its namespace.
type triggerScope struct {
	gvk       schema.GroupVersionKind
	namespace string
}

// triggerFinder tells whether triggers exist by listing the metadata of
// each trigger kind once per namespace (one request for a policy on a
// thousand Namespaces), matching by UID: a trigger deleted and created
// again under its name is another trigger, and the full name of a trigger
// whose label holds an encoded one is found too.
type triggerFinder struct {
	reader *inventoryReader
	uids   map[triggerScope]map[string]string // UID to name
}

// find returns the trigger's name and whether it exists.
func (f *triggerFinder) find(ctx context.Context, t triggerReport) (string, bool, error) {
	gv, err := schema.ParseGroupVersion(t.APIVersion)
	if err != nil {
		return t.Name, false, err
	}
	scope := triggerScope{gvk: gv.WithKind(t.Kind), namespace: t.Namespace}
	uids, ok := f.uids[scope]
	if !ok {
		if uids, err = f.list(ctx, scope); err != nil {
			return t.Name, false, err
		}
		f.uids[scope] = uids
	}
	if name, ok := uids[t.UID]; ok && t.UID != "" {
		return name, true, nil
	}
	return t.Name, false, nil
}

// list returns the UIDs and names of the objects of a scope.
func (f *triggerFinder) list(ctx context.Context, scope triggerScope) (map[string]string, error) {
	out := map[string]string{}
	mapping, err := f.reader.mapper.RESTMapping(scope.gvk.GroupKind(), scope.gvk.Version)
	if meta.IsNoMatchError(err) {
		return out, nil // the kind is no longer served: none of its objects is left
	}
	if err != nil {
		return nil, err
	}
	client := f.reader.metadata.Resource(mapping.Resource)
	var list func(context.Context, metav1.ListOptions) (*metav1.PartialObjectMetadataList, error) = client.List
	if mapping.Scope.Name() == meta.RESTScopeNameNamespace && scope.namespace != "" {
		list = client.Namespace(scope.namespace).List
	}
	p := pager.New(pager.SimplePageFunc(func(opts metav1.ListOptions) (runtime.Object, error) {
		return list(ctx, opts)
	}))
	err = p.EachListItem(ctx, metav1.ListOptions{}, func(obj runtime.Object) error {
		m := obj.(*metav1.PartialObjectMetadata)
		out[string(m.UID)] = m.Name
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("list %s: %w", mapping.Resource.GroupResource(), err)
	}
	return out, nil
}
