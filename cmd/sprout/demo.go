//go:build demo

package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/spf13/cobra"
	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"

	sproutv1alpha1 "github.com/sprout-gitops/sprout/api/sprout/v1alpha1"
	"github.com/sprout-gitops/sprout/fixtures"
	"github.com/sprout-gitops/sprout/internal/controlplane"
	"github.com/sprout-gitops/sprout/internal/manifest"
	"github.com/sprout-gitops/sprout/reconcile"
	"github.com/sprout-gitops/sprout/sources"
)

// The demo is built in only with the demo tag (`make run`): the control
// plane it starts comes from the test harness, whose envtest renders
// templates with text/template, and a binary that can reach
// reflect.Value.MethodByName keeps every exported method of every type it
// links. Without it the binary is much smaller and holds less memory
// before it does anything (docs/performance.md).
func init() { optionalCommands = append(optionalCommands, newDemoCommand) }

// demoOptions configure `sprout demo`.
type demoOptions struct {
	scenario string
	once     bool
	timeout  time.Duration
	// existing, when set, is the cluster to run on instead of a local
	// control plane (--existing-cluster).
	existing func() (*rest.Config, error)
}

func newDemoCommand(g *globalFlags) *cobra.Command {
	o := demoOptions{}
	var existing bool
	cmd := &cobra.Command{
		Use:   "demo",
		Short: "Run Sprout on a local control plane with an example policy",
		Long: `Start a local kube-apiserver and etcd (from bin/, built by 'make tools'), install
the CRDs, run the controller on an example from fixtures/, create its triggers,
and print every generated object as it appears.

The default scenario, gitops, is a platform repository: the demo commits it to
a new Git repository in a temporary folder and runs the controller with a Git
source on it (file://, --git-path policies), as 'sprout run --git-url' does, so
the policies come from Git; a commit there is taken within a second. Other
scenarios (--scenario zk-kafka-address) apply their policy.yaml to the cluster.

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
			klog.SetSlogLogger(clientLogger(log))
			if existing {
				o.existing = g.restConfig
			}
			return runDemo(cmd.Context(), cmd.OutOrStdout(), log, o)
		},
	}
	cmd.Flags().StringVar(&o.scenario, "scenario", "gitops", "the fixtures/ scenario to run: gitops (policies from Git) or one with a policy.yaml, such as zk-kafka-address")
	cmd.Flags().BoolVar(&o.once, "once", false, "stop once the scenario's expected objects exist (for scripts)")
	cmd.Flags().BoolVar(&existing, "existing-cluster", false, "run on the cluster of --kubeconfig ($KUBECONFIG) instead of a local control plane: the CRDs it lacks are installed, and what the demo applied is deleted at the end")
	cmd.Flags().DurationVar(&o.timeout, "timeout", 2*time.Minute, "fail if the Git repository's first revision is not taken by then, and with --once if the expected objects do not all exist")
	return cmd
}

func runDemo(ctx context.Context, out io.Writer, log *slog.Logger, o demoOptions) (err error) {
	out = &lockedWriter{w: out} // the table and the Git revisions print from several goroutines
	sc, err := readDemoScenario(o.scenario)
	if err != nil {
		return err
	}
	dir, err := os.MkdirTemp("", "sprout-demo-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	cfg, stop, err := demoCluster(ctx, out, o, dir)
	if err != nil {
		return err
	}
	defer func() { err = errors.Join(err, stop()) }()

	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	repoDir := filepath.Join(dir, "platform")
	controller, gitSource, err := newDemoController(out, cfg, log, sc, repoDir)
	if err != nil {
		return err
	}
	var wg sync.WaitGroup
	defer wg.Wait()
	defer cancel()
	wg.Go(func() {
		if err := controller.Run(ctx); err != nil && ctx.Err() == nil { // a stop is no error
			log.Error("controller stopped", "error", err.Error())
		}
	})
	timeout := time.NewTimer(o.timeout)
	defer timeout.Stop()
	applier, err := applyTriggers(ctx, out, cfg, sc, gitSource, timeout.C, o.timeout)
	if err != nil || applier == nil {
		return err
	}
	return showGenerated(ctx, out, applier, sc, o, repoDir, timeout.C)
}

// demoCluster starts the cluster the demo runs on: a local control plane
// whose kubeconfig it writes into dir, or the existing cluster, made ready.
// stop stops the one, and deletes from the other what the demo applied.
func demoCluster(ctx context.Context, out io.Writer, o demoOptions, dir string) (*rest.Config, func() error, error) {
	if o.existing != nil {
		cfg, err := o.existing()
		if err != nil {
			return nil, nil, err
		}
		if err := startExistingCluster(ctx, out, cfg, o.scenario); err != nil {
			return nil, nil, err
		}
		return cfg, func() error { return stopExistingCluster(out, cfg, o.scenario) }, nil
	}
	fmt.Fprintln(out, "starting a local control plane (kube-apiserver and etcd from bin/ or $KUBEBUILDER_ASSETS)")
	cp, err := controlplane.Start()
	if err != nil {
		return nil, nil, err
	}
	stop := func() error {
		err := cp.Stop()
		fmt.Fprintln(out, "stopped the control plane and removed its files")
		if err != nil {
			return fmt.Errorf("stop control plane: %w", err)
		}
		return nil
	}
	if err := writeDemoKubeconfig(out, cp, dir); err != nil {
		return nil, nil, errors.Join(err, stop())
	}
	return cp.Config, stop, nil
}

// demoScenario is the fixture a demo runs.
type demoScenario struct {
	name     string
	files    fs.FS
	expected []*unstructured.Unstructured
	// fromGit is set for a scenario with a policies/ folder: its
	// policies come from a Git repository, the others' from the cluster.
	fromGit bool
}

// readDemoScenario reads a scenario of fixtures/ and checks that what it needs
// is installed.
func readDemoScenario(name string) (demoScenario, error) {
	files, err := fixtures.FS(name)
	if err != nil {
		return demoScenario{}, fmt.Errorf("--scenario %s: %w", name, err)
	}
	expected, err := fixtures.Objects(name, "expected.yaml")
	if err != nil {
		return demoScenario{}, err
	}
	sc := demoScenario{name: name, files: files, expected: expected, fromGit: hasPolicyFolder(files)}
	if _, err := exec.LookPath("git"); sc.fromGit && err != nil {
		return demoScenario{}, fmt.Errorf("the %s demo reads its Git repository over file://, which needs git (`make git` installs it): %w", name, err)
	}
	return sc, nil
}

// writeDemoKubeconfig writes the control plane's kubeconfig into dir and
// tells the user how to use it.
func writeDemoKubeconfig(out io.Writer, cp *controlplane.ControlPlane, dir string) error {
	kubeconfig, err := cp.Kubeconfig()
	if err != nil {
		return err
	}
	path := filepath.Join(dir, "kubeconfig")
	if err := os.WriteFile(path, kubeconfig, 0o600); err != nil {
		return err
	}
	fmt.Fprintf(out, "control plane at %s; for kubectl while the demo runs:\n  export KUBECONFIG=%s\n", cp.Config.Host, path)
	return nil
}

// newDemoController makes the controller the demo runs: on the cluster's
// policies, and for a Git scenario on a repository committed in repoDir
// too, as sprout run --git-url would.
func newDemoController(out io.Writer, cfg *rest.Config, log *slog.Logger, sc demoScenario, repoDir string) (*reconcile.Controller, *reportingSource, error) {
	opts := reconcile.DefaultOptions()
	opts.Logger = log
	var gitSource *reportingSource
	if sc.fromGit {
		var err error
		if gitSource, err = demoGitSource(out, repoDir, sc.name, sc.files); err != nil {
			return nil, nil, err
		}
		client, err := dynamic.NewForConfig(cfg)
		if err != nil {
			return nil, nil, err
		}
		// As sprout run: the cluster's policies too, ahead of Git's.
		opts.Sources = []sources.Source{sources.NewCluster(client), gitSource}
	}
	controller, err := reconcile.New(cfg, opts)
	return controller, gitSource, err
}

// applyTriggers applies the scenario's triggers, and its policy when it is
// not from Git. A Git scenario's triggers wait for the first revision, so
// the output reads in order. It returns no Applier when ctx ended first.
func applyTriggers(ctx context.Context, out io.Writer, cfg *rest.Config, sc demoScenario, gitSource *reportingSource,
	expired <-chan time.Time, timeout time.Duration) (*manifest.Applier, error) {
	toApply := []string{"policy.yaml", "triggers.yaml"}
	if sc.fromGit {
		if err := awaitFirstRevision(ctx, gitSource, expired, timeout); err != nil || ctx.Err() != nil {
			return nil, err
		}
		toApply = []string{"triggers.yaml"}
	}
	return applyFixtures(ctx, out, cfg, sc.name, toApply)
}

// showGenerated prints generated objects as they change: until ctx ends,
// or with --once until every expected object exists.
func showGenerated(ctx context.Context, out io.Writer, applier *manifest.Applier, sc demoScenario, o demoOptions, repoDir string, expired <-chan time.Time) error {
	if sc.fromGit && !o.once {
		fmt.Fprintf(out, "\nSprout checks the %s branch every %s; to see it follow a commit:\n  cd %s\n  $EDITOR %s/team-quota.yaml    # pods: \"100\" -> \"50\", say\n  git commit -am 'Smaller quota'\n",
			demoBranch, demoPollInterval, repoDir, demoGitPath)
	}
	if o.once {
		fmt.Fprintf(out, "\ngenerated objects (%s), until all expected ones exist:\n", sproutv1alpha1.LabelManagedBy+"="+sproutv1alpha1.ManagedBy)
	} else {
		fmt.Fprintf(out, "\ngenerated objects (%s), as they change; Ctrl-C stops the demo:\n", sproutv1alpha1.LabelManagedBy+"="+sproutv1alpha1.ManagedBy)
	}
	seen, err := watchGenerated(ctx, out, applier, sc.expected)
	if err != nil {
		return err
	}
	if !o.once {
		<-ctx.Done()
		return nil
	}
	select {
	case <-seen.done:
		fmt.Fprintln(out, "\nall expected objects exist")
		return nil
	case <-expired:
		return fmt.Errorf("after %s still missing: %s", o.timeout, strings.Join(seen.missing(), ", "))
	case <-ctx.Done():
		return nil
	}
}

// applyFixtures applies files of a scenario to the cluster at cfg, saying
// what it applied, and returns the Applier for more.
func applyFixtures(ctx context.Context, out io.Writer, cfg *rest.Config, scenario string, files []string) (*manifest.Applier, error) {
	applier, err := manifest.NewApplier(cfg)
	if err != nil {
		return nil, err
	}
	for _, file := range files {
		objs, err := fixtures.Objects(scenario, file)
		if err != nil {
			return nil, err
		}
		if err := applier.Apply(ctx, objs...); err != nil {
			return nil, err
		}
		for _, obj := range objs {
			fmt.Fprintf(out, "applied %s %s\n", obj.GetKind(), obj.GetName())
		}
	}
	return applier, nil
}

// demoGitSource commits a scenario to a new repository at dir and returns
// the Git source that sprout run would make for it, printing what it takes.
func demoGitSource(out io.Writer, dir, scenario string, files fs.FS) (*reportingSource, error) {
	revision, err := commitScenario(dir, scenario, files)
	if err != nil {
		return nil, err
	}
	fmt.Fprintf(out, "committed fixtures/%s to a new Git repository, %s at %s\n", scenario, dir, revision)
	src, err := sources.NewGit(sources.GitOptions{
		URL:      "file://" + dir,
		Branch:   demoBranch,
		Path:     demoGitPath,
		Interval: demoPollInterval,
	})
	if err != nil {
		return nil, err
	}
	fmt.Fprintf(out, "running the controller with the policies in Git, as\n  sprout run --git-url file://%s --git-branch %s --git-path %s --poll-interval %s\n",
		dir, demoBranch, demoGitPath, demoPollInterval)
	return &reportingSource{GitSource: src, out: out, taken: make(chan struct{})}, nil
}

// awaitFirstRevision waits until the Git source has handed its first
// revision to the controller, or says why it has not when expired fires.
func awaitFirstRevision(ctx context.Context, src *reportingSource, expired <-chan time.Time, timeout time.Duration) error {
	select {
	case <-src.taken:
		return nil
	case <-ctx.Done():
		return nil // Ctrl-C: the caller stops
	case <-expired:
		return fmt.Errorf("no revision taken from Git after %s: %v", timeout, src.Status().Err)
	}
}

// lockedWriter makes each Write atomic, so lines printed from several
// goroutines never interleave.
type lockedWriter struct {
	mu sync.Mutex
	w  io.Writer
}

func (l *lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
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
// generates, updates or deletes of the kinds the scenario expects.
func watchGenerated(ctx context.Context, out io.Writer, applier *manifest.Applier, expected []*unstructured.Unstructured) (*generatedSet, error) {
	seen := &generatedSet{want: map[string]bool{}, done: make(chan struct{})}
	header := []string{"EVENT", "KIND", "NAMESPACE", "NAME", "POLICY", "TRIGGER"}
	columns := func(event string, u *unstructured.Unstructured) []string {
		labels := u.GetLabels()
		return []string{event, u.GetKind(), u.GetNamespace(), u.GetName(), labels[sproutv1alpha1.LabelPolicyName], labels[sproutv1alpha1.LabelTriggerName]}
	}
	// Columns as wide as the expected objects make them.
	widths := make([]int, len(header))
	for i, c := range header {
		widths[i] = len(c)
	}
	for _, e := range expected {
		for i, c := range columns("created", e) {
			widths[i] = max(widths[i], len(c))
		}
	}
	row := func(cells []string) {
		var line strings.Builder
		for i, c := range cells {
			if i < len(cells)-1 {
				fmt.Fprintf(&line, "%-*s  ", widths[i], c)
			} else {
				line.WriteString(c + "\n")
			}
		}
		fmt.Fprint(out, line.String())
	}
	row(header)

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
		selector := sproutv1alpha1.LabelManagedBy + "=" + sproutv1alpha1.ManagedBy
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
		_, _ = inf.AddEventHandler(cache.ResourceEventHandlerFuncs{
			AddFunc: func(obj any) {
				u := obj.(*unstructured.Unstructured)
				row(columns("created", u))
				seen.see(objectID(u))
			},
			UpdateFunc: func(old, obj any) {
				if u := obj.(*unstructured.Unstructured); changed(old.(*unstructured.Unstructured), u) {
					row(columns("updated", u))
				}
			},
			DeleteFunc: func(obj any) {
				if tombstone, ok := obj.(cache.DeletedFinalStateUnknown); ok {
					obj = tombstone.Obj
				}
				if u, ok := obj.(*unstructured.Unstructured); ok {
					row(columns("deleted", u))
				}
			},
		})
		go inf.RunWithContext(ctx)
	}
	return seen, nil
}

// changed reports whether an update changed what a reader of the object
// sees: its content or its labels and annotations, not its bookkeeping
// (resourceVersion, managedFields).
func changed(old, cur *unstructured.Unstructured) bool {
	strip := func(u *unstructured.Unstructured) map[string]any {
		c := u.DeepCopy().Object
		delete(c, "metadata")
		delete(c, "status")
		return c
	}
	return !equality.Semantic.DeepEqual(strip(old), strip(cur)) ||
		!maps.Equal(old.GetLabels(), cur.GetLabels()) ||
		!maps.Equal(old.GetAnnotations(), cur.GetAnnotations())
}
