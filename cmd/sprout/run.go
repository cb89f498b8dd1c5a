package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/klog/v2"

	"github.com/sprout-gitops/sprout/reconcile"
	"github.com/sprout-gitops/sprout/sources"
)

// runOptions are the flags of `sprout run` beyond the controller's own.
type runOptions struct {
	clusterPolicies bool
	policyDirs      []string
	pollInterval    time.Duration
	git             sources.GitOptions
	gitFiles        sources.AuthFiles
	gitSecretRef    string
	metricsAddress  string
	probeAddress    string
	leader          leaderOptions
}

// gitSource builds the Git source the flags describe, if any.
func (ro *runOptions) gitSource(ctx context.Context, cfg *rest.Config) (sources.Source, error) {
	if ro.git.URL == "" {
		return nil, nil
	}
	ro.git.Interval = ro.pollInterval
	auth, err := ro.gitAuth(ctx, cfg)
	if err != nil {
		return nil, err
	}
	ro.git.Auth = auth
	return sources.NewGit(ro.git)
}

// gitAuth builds the credentials the flags describe: a Secret, or files.
// Either is read again at every check, so rotated credentials apply without
// a restart.
func (ro *runOptions) gitAuth(ctx context.Context, cfg *rest.Config) (sources.AuthFunc, error) {
	files := ro.gitFiles
	sshFlags := givenFlags(map[string]string{
		"--git-ssh-key-file":          files.SSHKeyFile,
		"--git-ssh-key-password-file": files.SSHKeyPasswordFile,
		"--git-known-hosts-file":      files.KnownHostsFile,
	})
	httpsFlags := givenFlags(map[string]string{
		"--git-password-file": files.PasswordFile,
		"--git-token-file":    files.TokenFile,
	})
	if ro.gitSecretRef != "" {
		if given := slices.Concat(sshFlags, httpsFlags); len(given) > 0 {
			return nil, fmt.Errorf("--git-secret-ref and %s: take credentials from a Secret or from files, not both", given[0])
		}
		namespace, name, ok := strings.Cut(ro.gitSecretRef, "/")
		if !ok || namespace == "" || name == "" || strings.Contains(name, "/") {
			return nil, fmt.Errorf("--git-secret-ref %q: want <namespace>/<name>", ro.gitSecretRef)
		}
		client, err := kubernetes.NewForConfig(cfg)
		if err != nil {
			return nil, err
		}
		return sources.SecretAuth(client, namespace, name, ro.git.URL), nil
	}
	if sources.IsSSHURL(ro.git.URL) {
		switch {
		case len(httpsFlags) > 0:
			return nil, fmt.Errorf("%s is for HTTPS URLs; an SSH URL takes --git-ssh-key-file", httpsFlags[0])
		case files.KnownHostsFile == "":
			return nil, errors.New("an SSH URL needs --git-known-hosts-file (or --git-secret-ref): Sprout never connects to a host it cannot verify")
		case files.SSHKeyFile == "":
			return nil, errors.New("an SSH URL needs --git-ssh-key-file (or --git-secret-ref)")
		}
	} else {
		switch {
		case len(sshFlags) > 0:
			return nil, fmt.Errorf("%s is for SSH URLs (ssh:// or git@host:path)", sshFlags[0])
		case len(httpsFlags) > 1:
			return nil, errors.New("--git-password-file and --git-token-file: give one")
		case len(httpsFlags) == 0:
			return nil, nil
		}
	}
	auth := sources.FileAuth(ro.git.URL, files)
	// Read the files once now: a wrong path stops start-up rather than every check.
	if _, err := auth(ctx); err != nil {
		return nil, fmt.Errorf("git credentials: %w", err)
	}
	return auth, nil
}

// givenFlags returns the names of the flags with a value, sorted.
func givenFlags(values map[string]string) []string {
	var given []string
	for name, value := range values {
		if value != "" {
			given = append(given, name)
		}
	}
	slices.Sort(given)
	return given
}

func newRunCommand(g *globalFlags) *cobra.Command {
	opts := reconcile.DefaultOptions()
	ro := runOptions{clusterPolicies: true, pollInterval: time.Minute}
	cmd := &cobra.Command{
		Use:   "run",
		Short: "Run the controller against a cluster",
		Long: `Run the controller: watch GeneratingPolicies and NamespacedGeneratingPolicies
in the cluster (and in folders given with --policy-dir) and the trigger objects
they match, and keep the generated objects in place. Stops on SIGINT or SIGTERM.

A policy name found in several sources runs from the first: the cluster, then
the Git repository, then the folders in the order given.

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
An SSH URL needs known_hosts: Sprout never connects to a host it cannot verify.`,
		Example: `  sprout run --kubeconfig ~/.kube/config
  sprout run --policy-dir ./policies --poll-interval 30s
  sprout run --git-url https://github.com/example/platform --git-branch main --git-path policies
  sprout run --git-url https://github.com/example/platform --git-semver ">=1.0.0 <2.0.0" \
    --git-secret-ref sprout-system/git-credentials
  sprout run --git-url git@github.com:example/platform.git --git-commit 3f9c2e0d5b7a41c8e6f1a2b3c4d5e6f708192a3b \
    --git-ssh-key-file /etc/sprout/git/identity --git-known-hosts-file /etc/sprout/git/known_hosts`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			log, err := g.logger(os.Stderr)
			if err != nil {
				return err
			}
			klog.SetSlogLogger(log)
			cfg, err := g.restConfig()
			if err != nil {
				return err
			}
			if ro.clusterPolicies {
				client, err := dynamic.NewForConfig(cfg)
				if err != nil {
					return err
				}
				opts.Sources = append(opts.Sources, sources.NewCluster(client))
			}
			gitSrc, err := ro.gitSource(cmd.Context(), cfg)
			if err != nil {
				return err
			}
			if gitSrc != nil {
				opts.Sources = append(opts.Sources, gitSrc)
			}
			for _, dir := range ro.policyDirs {
				if info, err := os.Stat(dir); err != nil || !info.IsDir() {
					return fmt.Errorf("--policy-dir %s: not a folder", dir)
				}
				opts.Sources = append(opts.Sources, sources.NewDirectory(dir, ro.pollInterval))
			}
			if len(opts.Sources) == 0 {
				return fmt.Errorf("no policy source: keep --cluster-policies or give --git-url or --policy-dir")
			}
			opts.Logger = log
			reg := newRegistry()
			opts.Metrics = reg
			c, err := reconcile.New(cfg, opts)
			if err != nil {
				return err
			}
			ctx := cmd.Context()
			if err := serve(ctx, ro.metricsAddress, metricsHandler(reg), log, "metrics"); err != nil {
				return fmt.Errorf("--metrics-bind-address: %w", err)
			}
			if ro.leader.namespace == "" {
				ro.leader.namespace = inClusterNamespace()
			}
			if ro.leader.namespace == "" {
				ro.leader.namespace = "default"
			}
			elector := &leaderElector{opts: ro.leader, log: log}
			if err := serve(ctx, ro.probeAddress, probesHandler(func() string { return elector.ready(c.Synced) }), log, "probes"); err != nil {
				return fmt.Errorf("--health-probe-bind-address: %w", err)
			}
			log.Info("sprout starting", "host", cfg.Host, "version", version())
			return elector.run(ctx, cfg, c.Run)
		},
	}
	f := cmd.Flags()
	f.IntVar(&opts.Workers, "workers", opts.Workers, "how many policies are synced at once")
	f.BoolVar(&ro.clusterPolicies, "cluster-policies", ro.clusterPolicies, "run the policies stored in the cluster")
	f.StringSliceVar(&ro.policyDirs, "policy-dir", nil, "a folder of policy files (*.yaml, *.yml, any depth) to run; repeat for several")
	f.DurationVar(&ro.pollInterval, "poll-interval", ro.pollInterval, "how often policy folders are read again and the Git remote checked")
	f.StringVar(&ro.git.URL, "git-url", "", "a Git repository of policies (https://, ssh://, git@host:path or file://)")
	f.StringVar(&ro.git.Branch, "git-branch", "", "the branch to follow (default: the remote's default branch)")
	f.StringVar(&ro.git.Tag, "git-tag", "", "a tag to follow instead of a branch")
	f.StringVar(&ro.git.SemVer, "git-semver", "", `follow the highest tag in this semver range (">=1.0.0 <2.0.0", "1.x") instead of a branch`)
	f.StringVar(&ro.git.Commit, "git-commit", "", "run this commit (a full SHA-1) only, alone or on --git-branch")
	f.StringVar(&ro.git.Path, "git-path", "", "the folder of the repository holding the policies (default: all of it)")
	f.DurationVar(&ro.git.Timeout, "git-timeout", time.Minute, "how long one check or fetch of the remote may take")
	f.StringVar(&ro.gitFiles.Username, "git-username", "git", "the user name for HTTPS basic auth (with --git-password-file)")
	f.StringVar(&ro.gitFiles.PasswordFile, "git-password-file", "", "a file holding the HTTPS basic-auth password or token, read at every check")
	f.StringVar(&ro.gitFiles.TokenFile, "git-token-file", "", "a file holding an HTTPS bearer token, read at every check")
	f.StringVar(&ro.gitFiles.SSHKeyFile, "git-ssh-key-file", "", "a file holding the SSH private key (PEM or OpenSSH), read at every check")
	f.StringVar(&ro.gitFiles.SSHKeyPasswordFile, "git-ssh-key-password-file", "", "a file holding the passphrase of an encrypted --git-ssh-key-file")
	f.StringVar(&ro.gitFiles.KnownHostsFile, "git-known-hosts-file", "", "a known_hosts file with the SSH host keys to accept (required for SSH URLs)")
	f.StringVar(&ro.gitSecretRef, "git-secret-ref", "", "<namespace>/<name> of a Secret with the Git credentials (Flux's keys), read at every check")
	f.StringVar(&ro.metricsAddress, "metrics-bind-address", ":8080", `the address /metrics (Prometheus) is served on; "0" turns it off`)
	f.StringVar(&ro.probeAddress, "health-probe-bind-address", ":8081", `the address /healthz and /readyz are served on; "0" turns them off`)
	f.BoolVar(&ro.leader.enabled, "leader-elect", false, "run only while holding a coordination.k8s.io Lease, so one of several replicas writes")
	f.StringVar(&ro.leader.namespace, "leader-election-namespace", "", "the namespace of the Lease (default: the pod's, else default)")
	f.StringVar(&ro.leader.name, "leader-election-id", "sprout", "the name of the Lease")
	f.DurationVar(&ro.leader.leaseDuration, "leader-elect-lease-duration", 15*time.Second, "how long a standby replica waits before taking a Lease its holder stopped renewing")
	f.DurationVar(&ro.leader.renewDeadline, "leader-elect-renew-deadline", 10*time.Second, "how long the leader keeps trying to renew before it stops")
	f.DurationVar(&ro.leader.retryPeriod, "leader-elect-retry-period", 2*time.Second, "how often replicas try to take or renew the Lease")
	f.StringVar(&opts.ResyncSchedule, "resync-schedule", opts.ResyncSchedule, `cron spec ("0 * * * *", "@hourly", "@every 10m") of full recomputes that repair drift no event reported; "" turns them off`)
	return cmd
}
