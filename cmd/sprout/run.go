package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/robfig/cron/v3"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
	"k8s.io/klog/v2"

	"github.com/sprout-gitops/sprout/celenv"
	"github.com/sprout-gitops/sprout/globalctx"
	"github.com/sprout-gitops/sprout/internal/procs"
	"github.com/sprout-gitops/sprout/policyreport"
	"github.com/sprout-gitops/sprout/reconcile"
	"github.com/sprout-gitops/sprout/reconcile/blast"
)

// runOptions are the flags of `sprout run` beyond the controller's own.
type runOptions struct {
	sourceFlags
	allowedKinds   []string
	httpHosts      []string
	httpTimeout    time.Duration
	globalContext  globalctx.Options
	metricsAddress string
	probeAddress   string
	pprofAddress   string
	leader         leaderOptions
	// proofKeySecret names the Secret of the proof key, in Sprout's
	// namespace (proofkey.go).
	proofKeySecret string
	// reports: PolicyReports are written (--policy-reports);
	// openReports: in openreports.io's API (--openreports-enabled).
	reports, openReports bool
	// adaptiveProcs: GOMAXPROCS follows the load (--adaptive-procs).
	adaptiveProcs bool
}

func newRunCommand(g *globalFlags) *cobra.Command {
	opts := reconcile.DefaultOptions()
	ro := runOptions{sourceFlags: sourceFlags{clusterPolicies: true}}
	cmd := &cobra.Command{
		Use:     "run",
		Short:   "Run the controller against a cluster",
		Long:    runHelp,
		Example: runExamples,
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return runController(cmd.Context(), g, opts, ro)
		},
	}
	registerRunFlags(cmd.Flags(), g, &opts, &ro)
	return cmd
}

const runHelp = `Run the controller: watch GeneratingPolicies and NamespacedGeneratingPolicies
in the cluster (and in folders given with --policy-dir) and the trigger objects
they match, and keep the generated objects in place. Stops on SIGINT or SIGTERM.

A policy name found in several sources runs from the first: the cluster, then
the Git repository, then the Flux sources and the folders, each in the order
given.

--source-ref kind/namespace/name runs the policies in the artifact of a Flux
GitRepository, OCIRepository or Bucket (under --source-path): Sprout watches
the object and, when its artifact moves, downloads it from source-controller,
checks its digest and takes the revision whole. Flux holds the credentials,
verifies signatures and polls the origin.

The Git repository is checked every --poll-interval and fetched only when the
followed ref moved: a branch (--git-branch; the remote's default branch if no
ref is given), a tag (--git-tag) or the highest tag in a semver range
(--git-semver; tags may start with "v"). --git-commit pins one commit, alone or
on --git-branch; it is fetched once and never checked again.

Git credentials come from files (HTTPS: --git-password-file with --git-username,
or --git-token-file; SSH: --git-ssh-key-file, --git-known-hosts-file and
optionally --git-ssh-key-password-file) or from a Secret (--git-secret-ref),
with the key names of Flux: username and password, or bearerToken, for HTTPS;
identity and known_hosts, and password as the key's passphrase, for SSH. Both
are read again at every check, so rotated credentials apply without a restart.
An SSH URL needs known_hosts: Sprout never connects to a host it cannot verify.`

const runExamples = `  sprout run --kubeconfig ~/.kube/config
  sprout run --policy-dir ./policies --poll-interval 30s
  sprout run --git-url https://github.com/example/platform --git-branch main --git-path policies
  sprout run --git-url https://github.com/example/platform --git-semver ">=1.0.0 <2.0.0" \
    --git-secret-ref sprout-system/git-credentials
  sprout run --git-url git@github.com:example/platform.git --git-commit 3f9c2e0d5b7a41c8e6f1a2b3c4d5e6f708192a3b \
    --git-ssh-key-file /etc/sprout/git/identity --git-known-hosts-file /etc/sprout/git/known_hosts`

// registerRunFlags adds the flags of `sprout run` to f.
func registerRunFlags(f *pflag.FlagSet, g *globalFlags, opts *reconcile.Options, ro *runOptions) {
	f.IntVar(&opts.Workers, "workers", opts.Workers, "how many policies are synced at once")
	// The API server's priority and fairness is what protects it; the
	// client's own limit only keeps a runaway loop from flooding Sprout's
	// priority level, so it sits above what one replica can write
	// (docs/decisions.md, "Client rate limit").
	f.Float32Var(&g.qps, "kube-api-qps", 1000, "the most requests per second sent to the API server (burst: --kube-api-burst)")
	f.IntVar(&g.burst, "kube-api-burst", 2000, "the most requests sent at once above --kube-api-qps")
	ro.register(f, "run")
	f.IntVar(&opts.MaxObjectsPerTrigger, "max-objects-per-trigger", opts.MaxObjectsPerTrigger, "the most objects one evaluation may generate; more is an error (a policy's annotation sprout.dev/max-objects-per-trigger overrides it)")
	f.IntVar(&opts.MaxChain, "max-chain", opts.MaxChain, "how many policies a chain of generated objects may pass through, where policies set skipBackgroundRequests false; a cycle stops at once")
	f.StringVar(&opts.BlastRadius, "blast-radius", "off", `the most objects of a policy a new revision of it may delete or overwrite before those writes wait for `+"`sprout approve`"+`: a count ("10"), a percentage of the policy's objects ("20%"), or off; creations never wait (a policy's annotation sprout.dev/blast-radius overrides it)`)
	f.DurationVar(&opts.EvaluationTimeout, "evaluation-timeout", opts.EvaluationTimeout, "how long one evaluation of a policy for one trigger may take; longer is an error")
	f.Float64Var(&opts.TenantCPUShare, "tenant-cpu-share", opts.TenantCPUShare, "the share of one processor the evaluations of each tenant (the NamespacedGeneratingPolicies of one namespace) may take on average, after a burst of a second; past it the tenant's next evaluation waits until it is paid back. 0 turns the budget off")
	f.StringSliceVar(&ro.httpHosts, "http-allowed-hosts", nil, `the hosts policies may call with http.Get, Post and Put: "api.example.com", with a port to allow that port only, or "*.example.com" for its subdomains (default: none, every call fails)`)
	f.DurationVar(&ro.httpTimeout, "http-timeout", celenv.DefaultHTTPTimeout, "how long one http.Get, Post or Put of a policy may take")
	f.BoolVar(&ro.globalContext.WriteStatus, "global-context-status", true, "write each GlobalContextEntry's status (Ready, lastRefreshTime) as Kyverno does; turn it off where Kyverno's controller also serves the entries")
	f.IntVar(&ro.globalContext.MaxEntries, "global-context-max-entries", globalctx.DefaultMaxEntries, "the most GlobalContextEntries served: each kubernetesResource entry holds its resource's objects in memory")
	f.StringSliceVar(&ro.allowedKinds, "allowed-kinds", nil, `the only kinds Sprout may generate, as Kind or Kind.group ("ConfigMap,NetworkPolicy.networking.k8s.io"); others are refused (default: any)`)
	f.BoolVar(&opts.AllowUnnamedGrants, "allow-unnamed-grants", false, "let a GeneratingPolicy without sprout.dev/service-account write, as Sprout itself, objects that grant rights (RBAC objects, admission webhooks, APIServices, certificates, ServiceAccount tokens, anything that runs a workload); a binding must still bind only what Sprout holds. Off, such objects are refused: the policy names an account, whose writes the API server judges")
	registerAccounts(f, opts)
	f.StringSliceVar(&opts.ProtectedNamespaces, "protected-namespaces", opts.ProtectedNamespaces, "namespaces where a generated RoleBinding is judged as a ClusterRoleBinding, as their Secrets and accounts are the cluster's; Sprout's own namespaces are added: its pod's, its Lease's (--leader-election-namespace) and its ServiceAccount's, wherever it runs")
	registerExceptionFlags(f, opts)
	f.BoolVar(&opts.TriggerEvents, "trigger-events", false, "also emit an Event on each trigger for what was generated for it (a write per trigger)")
	registerReportFlags(f, opts, ro)
	f.StringVar(&ro.metricsAddress, "metrics-bind-address", ":8080", `the address /metrics (Prometheus) is served on; "0" turns it off`)
	f.StringVar(&ro.probeAddress, "health-probe-bind-address", ":8081", `the address /healthz and /readyz are served on; "0" turns them off`)
	f.BoolVar(&ro.adaptiveProcs, "adaptive-procs", true, "run on one processor while Sprout uses less than half of one, and on the runtime's default (the machine's processors or the container's CPU limit) once one is more than 70% busy; a GOMAXPROCS set in the environment turns it off")
	f.StringVar(&ro.pprofAddress, "pprof-bind-address", "0", `the address Go's runtime profiles (/debug/pprof/) are served on, such as "127.0.0.1:6060"; "0" turns them off`)
	f.BoolVar(&ro.leader.enabled, "leader-elect", false, "run only while holding a coordination.k8s.io Lease, so one of several replicas writes")
	f.StringVar(&ro.leader.namespace, "leader-election-namespace", "", "the namespace of the Lease (default: the pod's, else default)")
	f.StringVar(&ro.proofKeySecret, "proof-key-secret", defaultProofKeySecret, "the Secret, in the Lease's namespace (--leader-election-namespace), that holds the key Sprout signs its objects' origin with, created when absent; only an object whose signature verifies is pruned")
	f.StringVar(&ro.leader.name, "leader-election-id", "sprout", "the name of the Lease; a shard's (--watch-label-selector) adds a digest of its selector")
	f.DurationVar(&ro.leader.leaseDuration, "leader-elect-lease-duration", 15*time.Second, "how long a standby replica waits before taking a Lease its holder stopped renewing")
	f.DurationVar(&ro.leader.renewDeadline, "leader-elect-renew-deadline", 10*time.Second, "how long the leader keeps trying to renew before it stops")
	f.DurationVar(&ro.leader.retryPeriod, "leader-elect-retry-period", 2*time.Second, "how often replicas try to take or renew the Lease")
	f.StringVar(&opts.ResyncSchedule, "resync-schedule", opts.ResyncSchedule, `cron spec ("0 * * * *", "@hourly", "@every 10m") of full recomputes that repair drift no event reported; "" turns them off`)
}

// runController runs the controller until ctx ends: flags checked, sources
// built, endpoints served, the API server waited for, then, under leader
// election when asked, the controller itself.
func runController(ctx context.Context, g *globalFlags, opts reconcile.Options, ro runOptions) error {
	log, err := g.logger(os.Stderr)
	if err != nil {
		return err
	}
	klog.SetSlogLogger(clientLogger(log))
	if err := validateRunFlags(&opts, ro); err != nil {
		return err
	}
	if ro.adaptiveProcs {
		go procs.Follow(ctx, log)
	}
	if _, selector, err := ro.selector(); err == nil && selector != "" {
		// A shard has its own Lease and PolicySources (docs/sharding.md).
		opts.Shard = shardOf(selector)
		ro.leader.name += "-" + opts.Shard
	}
	cfg, err := g.restConfig()
	if err != nil {
		return err
	}
	reg := newRegistry()
	gctx, err := newGlobalContext(cfg, opts, ro, log)
	if err != nil {
		return err
	}
	opts.GlobalContext = gctx
	var c *reconcile.Controller
	// Who Sprout is, asked once the API server answers, while the records,
	// the policies and their triggers are read: its first sync needs the
	// proof key, and Sprout's own namespaces before its guard judges a
	// binding. The two questions are asked at once.
	opts.Identify = func(ctx context.Context) error {
		own := make(chan []string, 1)
		go func() { own <- ownNamespaces(ctx, cfg, ro.leader.namespace, log) }()
		err := prove(ctx, cfg, c, ro)
		c.Protect(<-own...)
		log.Debug("own namespaces and proof key known")
		return err
	}
	c, err = newRunController(ctx, cfg, opts, ro, reg, log)
	if err != nil {
		return err
	}
	elector, err := serveRunEndpoints(ctx, ro, reg, c, log)
	if err != nil {
		return err
	}
	log.Info("sprout starting", "host", cfg.Host, "version", currentBuild().String())
	go celenv.Prepare()
	if err := waitForAPIServer(ctx, cfg, log); err != nil {
		return err
	}
	select {
	case <-ctx.Done():
		return nil // stopped while it waited: nothing was started
	default:
	}
	log.Debug("the API server answers")
	// The entries are served, and their status written, by the leader.
	lead := func(ctx context.Context) error {
		go gctx.Run(ctx)
		return c.Run(ctx)
	}
	if err := elector.run(ctx, cfg, lead); err != nil && (ctx.Err() == nil || !errors.Is(err, context.Canceled)) {
		return err
	}
	return nil // stopped by a signal, even before the caches synced
}

// newGlobalContext makes the store of GlobalContextEntries policies read
// with globalContext.Get, calling out through the policies' http rules and
// reading urlPath entries from the API server, all but the proof key.
func newGlobalContext(cfg *rest.Config, opts reconcile.Options, ro runOptions, log *slog.Logger) (*globalctx.Store, error) {
	dyn, err := dynamic.NewForConfig(cfg)
	if err != nil {
		return nil, fmt.Errorf("dynamic client: %w", err)
	}
	api, err := discovery.NewDiscoveryClientForConfig(cfg)
	if err != nil {
		return nil, fmt.Errorf("API client: %w", err)
	}
	o := ro.globalContext
	o.Client, o.API, o.HTTP, o.Logger = dyn, api.RESTClient(), opts.HTTP, log
	// The proof key's Secret: the global context serves it to no urlPath entry.
	o.ProofKey = globalctx.KeySecret{Namespace: leaseNamespace(ro), Name: ro.proofKeySecret}
	return globalctx.New(o), nil
}

// newRunController makes the controller on the sources the flags name.
func newRunController(ctx context.Context, cfg *rest.Config, opts reconcile.Options, ro runOptions, reg *prometheus.Registry, log *slog.Logger) (*reconcile.Controller, error) {
	srcs, err := ro.sources(ctx, cfg)
	if err != nil {
		return nil, err
	}
	if len(srcs) == 0 {
		return nil, fmt.Errorf("no policy source: keep --cluster-policies or give --git-url, --source-ref or --policy-dir")
	}
	opts.Sources = srcs
	opts.Logger = log
	opts.Metrics = reg
	if !ro.reports {
		opts.PolicyReports = nil
	} else if ro.openReports {
		o := *opts.PolicyReports
		o.API = policyreport.OpenReports
		opts.PolicyReports = &o
	}
	return reconcile.New(cfg, opts)
}

// serveRunEndpoints serves metrics, profiles and probes, and returns the
// leader elector whose state the readiness probe reports.
func serveRunEndpoints(ctx context.Context, ro runOptions, reg *prometheus.Registry, c *reconcile.Controller, log *slog.Logger) (*leaderElector, error) {
	if err := serve(ctx, ro.metricsAddress, metricsHandler(reg), log, "metrics"); err != nil {
		return nil, fmt.Errorf("--metrics-bind-address: %w", err)
	}
	if err := serve(ctx, ro.pprofAddress, pprofHandler(), log, "pprof"); err != nil {
		return nil, fmt.Errorf("--pprof-bind-address: %w", err)
	}
	ro.leader.namespace = leaseNamespace(ro)
	elector := &leaderElector{opts: ro.leader, log: log}
	if err := serve(ctx, ro.probeAddress, probesHandler(func() string { return elector.ready(c.Synced) }), log, "probes"); err != nil {
		return nil, fmt.Errorf("--health-probe-bind-address: %w", err)
	}
	return elector, nil
}

// registerExceptionFlags adds the flags that turn PolicyExceptions on:
// `sprout diff` takes them too, to plan what run would do.
func registerExceptionFlags(f *pflag.FlagSet, opts *reconcile.Options) {
	f.BoolVar(&opts.PolicyExceptions, "enable-policy-exceptions", false, "apply the PolicyExceptions of the policy sources (Kyverno's --enablePolicyException)")
	f.StringVar(&opts.ExceptionNamespace, "exception-namespace", "", `the only namespace whose PolicyExceptions count (Kyverno's --exceptionNamespace); "" or "*" means every namespace`)
}

// registerAccounts adds the flags that bound which ServiceAccounts policies
// run as: `sprout diff` takes them too, to plan as `sprout run` writes.
func registerAccounts(f *pflag.FlagSet, opts *reconcile.Options) {
	f.StringVar(&opts.DefaultServiceAccount, "default-service-account", opts.DefaultServiceAccount, `the ServiceAccount, in its own namespace, a NamespacedGeneratingPolicy without the sprout.dev/service-account annotation runs as; "" runs them with Sprout's own rights`)
	f.StringSliceVar(&opts.ServiceAccountNamespaces, "service-account-namespaces", nil, `the namespaces whose ServiceAccounts a GeneratingPolicy may run as (sprout.dev/service-account: namespace/name); Sprout's RBAC must let it impersonate them there (default: none)`)
}

// validateRunFlags checks every flag that needs no cluster, so a typo is
// reported at once rather than after the caches have synced.
func validateRunFlags(opts *reconcile.Options, ro runOptions) error {
	if err := blast.Validate(opts.BlastRadius); err != nil {
		return fmt.Errorf("--blast-radius: %w", err)
	}
	if err := reconcile.ValidateTenantCPUShare(opts.TenantCPUShare); err != nil {
		return fmt.Errorf("--tenant-cpu-share: %w", err)
	}
	if err := reconcile.ValidateServiceAccountOptions(*opts); err != nil {
		return err
	}
	if opts.ResyncSchedule != "" {
		if _, err := cron.ParseStandard(opts.ResyncSchedule); err != nil {
			return fmt.Errorf("--resync-schedule %q: %w", opts.ResyncSchedule, err)
		}
	}
	kinds, err := reconcile.ParseKinds(ro.allowedKinds)
	if err != nil {
		return fmt.Errorf("--allowed-kinds: %w", err)
	}
	opts.AllowedKinds = kinds
	if len(ro.httpHosts) > 0 {
		if ro.httpTimeout <= 0 {
			return fmt.Errorf("--http-timeout %s: want more than 0", ro.httpTimeout)
		}
		web, err := celenv.NewHTTP(celenv.HTTPOptions{AllowedHosts: ro.httpHosts, Timeout: ro.httpTimeout})
		if err != nil {
			return fmt.Errorf("--http-allowed-hosts: %w", err)
		}
		opts.HTTP = web
	}
	if ro.globalContext.MaxEntries < 1 {
		return fmt.Errorf("--global-context-max-entries %d: want at least 1", ro.globalContext.MaxEntries)
	}
	if ro.pollInterval <= 0 {
		return fmt.Errorf("--poll-interval %s: want more than 0", ro.pollInterval)
	}
	for flag, addr := range map[string]string{"--metrics-bind-address": ro.metricsAddress,
		"--health-probe-bind-address": ro.probeAddress, "--pprof-bind-address": ro.pprofAddress} {
		if addr == "0" || addr == "" {
			continue
		}
		if _, _, err := net.SplitHostPort(addr); err != nil {
			return fmt.Errorf("%s %q: %w", flag, addr, err)
		}
	}
	if l := ro.leader; l.enabled && !(l.leaseDuration > l.renewDeadline && float64(l.renewDeadline) > 1.2*float64(l.retryPeriod) && l.retryPeriod > 0) {
		return fmt.Errorf("--leader-elect-lease-duration (%s) must exceed --leader-elect-renew-deadline (%s), which must exceed 1.2 times --leader-elect-retry-period (%s)",
			l.leaseDuration, l.renewDeadline, l.retryPeriod)
	}
	return nil
}

// apiServerProbeTimeout bounds one try of waitForAPIServer when
// --request-timeout does not.
const apiServerProbeTimeout = 10 * time.Second

// waitForAPIServer returns once the API server answers, saying at every
// failed try what it waits for and when it tries again: without it, a
// server that is down left only "waiting for informer caches" on screen.
func waitForAPIServer(ctx context.Context, cfg *rest.Config, log *slog.Logger) error {
	probe := rest.CopyConfig(cfg)
	if probe.Timeout == 0 {
		// A server that accepts connections and never answers would hold
		// the first try for ever, and the log would say nothing.
		probe.Timeout = apiServerProbeTimeout
	}
	for delay := time.Second; ; delay = min(2*delay, 30*time.Second) {
		err := reachable(probe)
		if err == nil {
			return nil
		}
		log.Warn("waiting for the API server", "error", err.Error(), "retry_in", delay.String())
		select {
		case <-ctx.Done():
			return nil // stopped while waiting: a shutdown, not an error
		case <-time.After(delay):
		}
	}
}

// registerReportFlags adds the flags of PolicyReports: on by default, as
// Kyverno writes them by default.
func registerReportFlags(f *pflag.FlagSet, opts *reconcile.Options, ro *runOptions) {
	if opts.PolicyReports == nil {
		opts.PolicyReports = new(policyreport.DefaultOptions())
	}
	f.BoolVar(&ro.reports, "policy-reports", true, "write a wgpolicyk8s.io PolicyReport per trigger with each policy's result, as Kyverno does (needs the report CRDs: deploy/report-crds)")
	f.BoolVar(&ro.openReports, "openreports-enabled", false, "write the reports as openreports.io Reports and ClusterReports, as Kyverno does with --openreportsEnabled (needs their CRDs: deploy/report-crds/openreports)")
	f.Float64Var(&opts.PolicyReports.QPS, "policy-report-qps", opts.PolicyReports.QPS, "the most PolicyReport writes a second (burst: twice as many); reports wait, generation does not")
}

// leaseNamespace is the namespace of the Lease: --leader-election-namespace,
// else the pod's, else default.
func leaseNamespace(ro runOptions) string {
	switch {
	case ro.leader.namespace != "":
		return ro.leader.namespace
	case inClusterNamespace() != "":
		return inClusterNamespace()
	}
	return "default"
}

// prove gives c the proof key, from its Secret in the Lease's namespace.
func prove(ctx context.Context, cfg *rest.Config, c *reconcile.Controller, ro runOptions) error {
	kube, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return err
	}
	key, err := proofKey(ctx, kube, leaseNamespace(ro), ro.proofKeySecret)
	if err != nil {
		return err
	}
	return c.Prove(key, leaseNamespace(ro), ro.proofKeySecret)
}
