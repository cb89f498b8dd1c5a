package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"slices"
	"strings"
	"time"

	"github.com/spf13/cobra"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"

	apiv1 "github.com/sprout-gitops/sprout/api/policies/v1"
	sproutv1alpha1 "github.com/sprout-gitops/sprout/api/sprout/v1alpha1"
	"github.com/sprout-gitops/sprout/inventory"
	"github.com/sprout-gitops/sprout/reconcile"
)

// dayTwoOptions configure `sprout reconcile`, `suspend` and `resume`.
type dayTwoOptions struct {
	namespace string
	timeout   time.Duration
}

func newReconcileCommand(g *globalFlags) *cobra.Command {
	o := dayTwoOptions{}
	cmd := &cobra.Command{
		Use:   "reconcile POLICY",
		Short: "Sync a policy now and print what changed",
		Long: `Ask Sprout to sync a policy stored in the cluster now, as ` + "`flux reconcile`" + ` does:
set its reconcile.fluxcd.io/requestedAt annotation to the current time, wait until the
policy's PolicyInventory record says the request was handled
(status.lastHandledReconcileAt), then print the policy's Ready condition, its counts
before and after, and the Generated and Pruned Events of the sync.

The sync compares every object of the policy in full and asks discovery again, as a
scheduled resync does: it repairs what no event reported, such as an object in the
policy's way that was deleted, and finds a trigger kind installed since. A suspended
policy is not synced: resume it.

POLICY is read as ` + "`sprout inventory`" + ` reads it (NAME, gpol/NAME, ngpol/NAME with -n).`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return runDayTwo(cmd.Context(), cmd.OutOrStdout(), g, o, args[0], requestReconcile)
		},
	}
	addDayTwoFlags(cmd, &o)
	return cmd
}

func addDayTwoFlags(cmd *cobra.Command, o *dayTwoOptions) {
	cmd.Flags().StringVarP(&o.namespace, "namespace", "n", "", "the namespace of a NamespacedGeneratingPolicy")
	cmd.Flags().DurationVar(&o.timeout, "timeout", 2*time.Minute, "how long to wait for Sprout to handle the request")
}

// dayTwoAction is what a verb does to a policy: the merge patch of its
// annotations and, when it waits for a sync, the request token it sets.
type dayTwoAction func(p *policyClient, now time.Time) (annotations map[string]any, token string, err error)

// requestReconcile asks for a sync of a policy that is not suspended.
func requestReconcile(p *policyClient, now time.Time) (map[string]any, string, error) {
	if p.live.GetAnnotations()[reconcile.AnnotationSuspend] == "true" {
		return nil, "", fmt.Errorf("%s is suspended: `sprout resume` it, which also syncs it", p.id)
	}
	token := requestToken(now)
	return map[string]any{reconcile.AnnotationReconcileRequest: token}, token, nil
}

// requestToken is a reconcile request's value, the time as `flux reconcile`
// writes it.
func requestToken(now time.Time) string { return now.UTC().Format(time.RFC3339Nano) }

// runDayTwo applies action to the policy arg names and, when it asks for
// a sync, waits for it and reports it.
func runDayTwo(ctx context.Context, out io.Writer, g *globalFlags, o dayTwoOptions, arg string, action dayTwoAction) error {
	p, err := newPolicyClient(ctx, g, arg, o.namespace)
	if err != nil {
		return err
	}
	before, err := p.record(ctx)
	if err != nil {
		return err
	}
	seen, err := p.changeEvents(ctx)
	if err != nil {
		return err
	}
	now := time.Now()
	annotations, token, err := action(p, now)
	if err != nil {
		return err
	}
	if err := p.annotate(ctx, annotations); err != nil {
		return err
	}
	if token == "" {
		return nil
	}
	fmt.Fprintf(out, "%s: sync requested (%s=%s)\n", p.id, reconcile.AnnotationReconcileRequest, token)
	after, err := p.waitHandled(ctx, token, o.timeout)
	if err != nil {
		return err
	}
	events, err := p.events(ctx, counts(seen))
	if err != nil {
		return err
	}
	printHandled(out, p.id, before, after, events)
	return nil
}

// policyClient reaches one policy stored in the cluster and its record.
type policyClient struct {
	id      string
	ref     sproutv1alpha1.PolicyReference
	policy  dynamic.ResourceInterface
	records dynamic.ResourceInterface
	kube    kubernetes.Interface
	live    metav1.Object
}

func newPolicyClient(ctx context.Context, g *globalFlags, arg, namespace string) (*policyClient, error) {
	ref, err := parsePolicyArg(arg, namespace)
	if err != nil {
		return nil, err
	}
	cfg, err := g.restConfig()
	if err != nil {
		return nil, err
	}
	client, err := dynamic.NewForConfig(cfg)
	if err != nil {
		return nil, err
	}
	kube, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil, err
	}
	gvr := apiv1.GeneratingPolicies
	if ref.Kind == apiv1.NamespacedGeneratingPolicyKind {
		gvr = apiv1.NamespacedGeneratingPolicies
	}
	p := &policyClient{id: policyID(ref), ref: ref, policy: client.Resource(gvr).Namespace(ref.Namespace),
		records: client.Resource(sproutv1alpha1.PolicyInventories), kube: kube}
	live, err := p.policy.Get(ctx, ref.Name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return nil, fmt.Errorf("%s: not in the cluster (a policy from Git or a folder takes its annotations from there)", p.id)
	}
	if err != nil {
		return nil, fmt.Errorf("%s: %w", p.id, err)
	}
	p.live = live
	return p, nil
}

// annotate merges annotations (a nil value removes one) into the policy's.
func (p *policyClient) annotate(ctx context.Context, annotations map[string]any) error {
	patch, err := json.Marshal(map[string]any{"metadata": map[string]any{"annotations": annotations}})
	if err != nil {
		return err
	}
	if _, err := p.policy.Patch(ctx, p.ref.Name, types.MergePatchType, patch, metav1.PatchOptions{FieldManager: "sprout"}); err != nil {
		return fmt.Errorf("%s: annotate: %w", p.id, err)
	}
	return nil
}

// record reads the policy's record; nil when it has none yet.
func (p *policyClient) record(ctx context.Context) (*sproutv1alpha1.PolicyInventory, error) {
	u, err := p.records.Get(ctx, inventory.RecordName(p.ref), metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("%s: record: %w", p.id, err)
	}
	rec := &sproutv1alpha1.PolicyInventory{}
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, rec); err != nil {
		return nil, fmt.Errorf("%s: record: %w", p.id, err)
	}
	return rec, nil
}

// waitHandled waits until the record says the request token was handled.
func (p *policyClient) waitHandled(ctx context.Context, token string, timeout time.Duration) (*sproutv1alpha1.PolicyInventory, error) {
	var rec *sproutv1alpha1.PolicyInventory
	err := wait.PollUntilContextTimeout(ctx, 250*time.Millisecond, timeout, true, func(ctx context.Context) (bool, error) {
		var err error
		rec, err = p.record(ctx)
		return rec != nil && rec.Status.LastHandledReconcileAt == token, err
	})
	if err != nil {
		return nil, fmt.Errorf("%s: the sync was not handled within %s (is Sprout running, and does it run this policy?): %w", p.id, timeout, err)
	}
	return rec, nil
}

// eventsWait bounds how long a handled sync's Events are waited for:
// Sprout sends them apart from the status, and a sync that changed nothing
// sends none.
const eventsWait = 2 * time.Second

// eventCounts are the policy's Generated and Pruned Events by name, with
// their counts: a later sync's Event is a new one, or one counted again.
type eventCounts map[string]int32

// events lists the policy's Generated and Pruned Events not in before,
// waiting up to eventsWait for the first.
func (p *policyClient) events(ctx context.Context, before eventCounts) ([]corev1.Event, error) {
	var events []corev1.Event
	// The list is asked with ctx, not the poll's: near the end of
	// eventsWait, the client's rate limiter would refuse a request the
	// poll's deadline cannot wait for, and fail the command.
	err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, eventsWait, true, func(context.Context) (bool, error) {
		all, err := p.changeEvents(ctx)
		events = slices.DeleteFunc(all, func(e corev1.Event) bool { return e.Count <= before[e.Name] })
		return len(events) > 0, err
	})
	if wait.Interrupted(err) {
		err = nil
	}
	return events, err
}

// counts indexes events by name.
func counts(events []corev1.Event) eventCounts {
	c := eventCounts{}
	for _, e := range events {
		c[e.Name] = e.Count
	}
	return c
}

// changeEvents lists the policy's Generated and Pruned Events.
func (p *policyClient) changeEvents(ctx context.Context) ([]corev1.Event, error) {
	ns := p.ref.Namespace
	if ns == "" {
		ns = metav1.NamespaceDefault // where a cluster-scoped object's Events go
	}
	list, err := p.kube.CoreV1().Events(ns).List(ctx, metav1.ListOptions{FieldSelector: fields.Set{
		"involvedObject.kind": p.ref.Kind, "involvedObject.name": p.ref.Name,
	}.String()})
	if err != nil {
		return nil, fmt.Errorf("%s: events: %w", p.id, err)
	}
	return slices.DeleteFunc(list.Items, func(e corev1.Event) bool {
		return e.Reason != reconcile.ReasonGenerated && e.Reason != reconcile.ReasonPruned
	}), nil
}

// printHandled tells the outcome of a sync: Ready, the counts before and
// after, and what it generated and pruned.
func printHandled(out io.Writer, id string, before, after *sproutv1alpha1.PolicyInventory, events []corev1.Event) {
	ready := meta.FindStatusCondition(after.Status.Conditions, reconcile.ConditionReady)
	if ready == nil {
		ready = &metav1.Condition{Status: metav1.ConditionUnknown, Reason: "NoStatus"}
	}
	fmt.Fprintf(out, "%s: synced: Ready %s, %s: %s\n", id, ready.Status, ready.Reason, ready.Message)
	if before != nil {
		fmt.Fprintf(out, "  triggers %d -> %d, objects %d -> %d\n", before.Status.Triggers, after.Status.Triggers, before.Status.Objects, after.Status.Objects)
	}
	if len(events) == 0 {
		fmt.Fprintln(out, "  nothing generated or pruned")
	}
	for _, e := range events {
		fmt.Fprintf(out, "  %s: %s\n", e.Reason, strings.TrimSpace(e.Message))
	}
}
