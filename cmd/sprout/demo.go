package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/spf13/cobra"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"

	"github.com/sprout-gitops/sprout/fixtures"
	"github.com/sprout-gitops/sprout/internal/controlplane"
	"github.com/sprout-gitops/sprout/internal/manifest"
	"github.com/sprout-gitops/sprout/inventory"
	"github.com/sprout-gitops/sprout/reconcile"
)

// demoOptions configure `sprout demo`.
type demoOptions struct {
	scenario string
	once     bool
	timeout  time.Duration
}

func newDemoCommand(g *globalFlags) *cobra.Command {
	o := demoOptions{}
	cmd := &cobra.Command{
		Use:   "demo",
		Short: "Run Sprout on a local control plane with an example policy",
		Long: `Start a local kube-apiserver and etcd (from bin/, built by 'make tools'), install
the CRDs, run the controller, apply an example policy and its triggers from
fixtures/, and print every generated object as it appears.

Ctrl-C stops everything the demo started and removes its temporary files.
With --once the demo stops by itself once the scenario's expected objects exist
(exit status 0), or fails after --timeout.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			// The demo's own output is the table; the controller's log
			// shows only warnings unless --log-level asks for more.
			if !cmd.Flags().Changed("log-level") {
				g.logLevel = "warn"
			}
			log, err := g.logger(cmd.ErrOrStderr())
			if err != nil {
				return err
			}
			klog.SetSlogLogger(log)
			return runDemo(cmd.Context(), cmd.OutOrStdout(), log, o)
		},
	}
	cmd.Flags().StringVar(&o.scenario, "scenario", "zk-kafka-address", "the fixtures/ scenario to run")
	cmd.Flags().BoolVar(&o.once, "once", false, "stop once the scenario's expected objects exist (for scripts)")
	cmd.Flags().DurationVar(&o.timeout, "timeout", 2*time.Minute, "with --once, fail if the expected objects do not all exist by then")
	return cmd
}

func runDemo(ctx context.Context, out io.Writer, log *slog.Logger, o demoOptions) (err error) {
	expected, err := fixtures.Objects(o.scenario, "expected.yaml")
	if err != nil {
		return err
	}
	fmt.Fprintln(out, "starting a local control plane (kube-apiserver and etcd from bin/)")
	cp, err := controlplane.Start()
	if err != nil {
		return err
	}
	defer func() {
		if stopErr := cp.Stop(); stopErr != nil {
			err = errors.Join(err, fmt.Errorf("stop control plane: %w", stopErr))
		}
		fmt.Fprintln(out, "stopped the control plane and removed its files")
	}()

	dir, err := os.MkdirTemp("", "sprout-demo-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	kubeconfig, err := cp.Kubeconfig()
	if err != nil {
		return err
	}
	kubeconfigPath := filepath.Join(dir, "kubeconfig")
	if err := os.WriteFile(kubeconfigPath, kubeconfig, 0o600); err != nil {
		return err
	}
	fmt.Fprintf(out, "control plane at %s; for kubectl while the demo runs:\n  export KUBECONFIG=%s\n", cp.Config.Host, kubeconfigPath)

	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	opts := reconcile.DefaultOptions()
	opts.Logger = log
	controller, err := reconcile.New(cp.Config, opts)
	if err != nil {
		return err
	}
	var wg sync.WaitGroup
	defer wg.Wait()
	defer cancel()
	wg.Go(func() {
		if err := controller.Run(ctx); err != nil {
			log.Error("controller stopped", "error", err.Error())
		}
	})

	applier, err := manifest.NewApplier(cp.Config)
	if err != nil {
		return err
	}
	for _, file := range []string{"policy.yaml", "triggers.yaml"} {
		objs, err := fixtures.Objects(o.scenario, file)
		if err != nil {
			return err
		}
		if err := applier.Apply(ctx, objs...); err != nil {
			return err
		}
		for _, obj := range objs {
			fmt.Fprintf(out, "applied %s %s\n", obj.GetKind(), obj.GetName())
		}
	}

	if o.once {
		fmt.Fprintf(out, "\ngenerated objects (%s), until all expected ones exist:\n", inventory.LabelManagedBy+"="+inventory.ManagedBy)
	} else {
		fmt.Fprintf(out, "\ngenerated objects (%s), as they appear; Ctrl-C stops the demo:\n", inventory.LabelManagedBy+"="+inventory.ManagedBy)
	}
	seen, err := watchGenerated(ctx, out, applier, expected)
	if err != nil {
		return err
	}
	if !o.once {
		<-ctx.Done()
		return nil
	}
	timer := time.NewTimer(o.timeout)
	defer timer.Stop()
	for {
		select {
		case <-seen.done:
			fmt.Fprintln(out, "\nall expected objects exist")
			return nil
		case <-timer.C:
			return fmt.Errorf("after %s still missing: %s", o.timeout, strings.Join(seen.missing(), ", "))
		case <-ctx.Done():
			return nil
		}
	}
}

// generatedSet tracks which expected objects have been seen.
type generatedSet struct {
	mu     sync.Mutex
	want   map[string]bool
	done   chan struct{}
	closed bool
}

func (s *generatedSet) see(id string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.want, id)
	if len(s.want) == 0 && !s.closed {
		s.closed = true
		close(s.done)
	}
}

func (s *generatedSet) missing() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []string
	for id := range s.want {
		out = append(out, id)
	}
	sort.Strings(out)
	return out
}

func objectID(u *unstructured.Unstructured) string {
	return u.GetKind() + " " + u.GetNamespace() + "/" + u.GetName()
}

// watchGenerated prints, as a kubectl-like table, every object Sprout
// generates of the kinds the scenario expects.
func watchGenerated(ctx context.Context, out io.Writer, applier *manifest.Applier, expected []*unstructured.Unstructured) (*generatedSet, error) {
	seen := &generatedSet{want: map[string]bool{}, done: make(chan struct{})}
	const row = "%-10s %-16s %-24s %-22s %-16s\n"
	fmt.Fprintf(out, row, "KIND", "NAMESPACE", "NAME", "POLICY", "TRIGGER")
	var printMu sync.Mutex
	watched := map[string]bool{}
	for _, e := range expected {
		seen.want[objectID(e)] = true
		if watched[e.GetAPIVersion()+"/"+e.GetKind()] {
			continue
		}
		watched[e.GetAPIVersion()+"/"+e.GetKind()] = true
		lw, err := applier.AllNamespaces(e)
		if err != nil {
			return nil, err
		}
		selector := inventory.LabelManagedBy + "=" + inventory.ManagedBy
		inf := cache.NewSharedIndexInformer(&cache.ListWatch{
			ListWithContextFunc: func(ctx context.Context, opts metav1.ListOptions) (runtime.Object, error) {
				opts.LabelSelector = selector
				return lw.List(ctx, opts)
			},
			WatchFuncWithContext: func(ctx context.Context, opts metav1.ListOptions) (watch.Interface, error) {
				opts.LabelSelector = selector
				return lw.Watch(ctx, opts)
			},
		}, &unstructured.Unstructured{}, 0, cache.Indexers{})
		_, _ = inf.AddEventHandler(cache.ResourceEventHandlerFuncs{AddFunc: func(obj any) {
			u := obj.(*unstructured.Unstructured)
			labels := u.GetLabels()
			printMu.Lock()
			fmt.Fprintf(out, row, u.GetKind(), u.GetNamespace(), u.GetName(), labels[inventory.LabelPolicyName], labels[inventory.LabelTriggerName])
			printMu.Unlock()
			seen.see(objectID(u))
		}})
		go inf.RunWithContext(ctx)
	}
	return seen, nil
}
