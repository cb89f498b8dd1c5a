package main

import (
	"fmt"
	"os"
	"time"

	"github.com/spf13/cobra"
	"k8s.io/client-go/dynamic"
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
	gitUser         string
	gitPasswordFile string
	gitTokenFile    string
}

// gitSource builds the Git source the flags describe, if any.
func (ro *runOptions) gitSource() (sources.Source, error) {
	if ro.git.URL == "" {
		return nil, nil
	}
	ro.git.Interval = ro.pollInterval
	if ro.gitTokenFile != "" || ro.gitPasswordFile != "" {
		ro.git.Auth = sources.FileAuth(ro.git.URL, sources.AuthFiles{Username: ro.gitUser, PasswordFile: ro.gitPasswordFile, TokenFile: ro.gitTokenFile})
	}
	return sources.NewGit(ro.git)
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
the Git repository, then the folders in the order given.`,
		Example: `  sprout run --kubeconfig ~/.kube/config
  sprout run --policy-dir ./policies --poll-interval 30s
  sprout run --git-url https://github.com/example/platform --git-branch main --git-path policies`,
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
			gitSrc, err := ro.gitSource()
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
			c, err := reconcile.New(cfg, opts)
			if err != nil {
				return err
			}
			log.Info("sprout starting", "host", cfg.Host, "version", version())
			return c.Run(cmd.Context())
		},
	}
	f := cmd.Flags()
	f.IntVar(&opts.Workers, "workers", opts.Workers, "how many policies are synced at once")
	f.BoolVar(&ro.clusterPolicies, "cluster-policies", ro.clusterPolicies, "run the policies stored in the cluster")
	f.StringSliceVar(&ro.policyDirs, "policy-dir", nil, "a folder of policy files (*.yaml, *.yml, any depth) to run; repeat for several")
	f.DurationVar(&ro.pollInterval, "poll-interval", ro.pollInterval, "how often policy folders are read again and the Git remote checked")
	f.StringVar(&ro.git.URL, "git-url", "", "a Git repository of policies (https://, ssh:// or file://)")
	f.StringVar(&ro.git.Branch, "git-branch", "", "the branch to follow (default: the remote's default branch)")
	f.StringVar(&ro.git.Tag, "git-tag", "", "a tag to follow instead of a branch")
	f.StringVar(&ro.git.Path, "git-path", "", "the folder of the repository holding the policies (default: all of it)")
	f.DurationVar(&ro.git.Timeout, "git-timeout", time.Minute, "how long one check or fetch of the remote may take")
	f.StringVar(&ro.gitUser, "git-username", "git", "the user name for HTTPS basic auth (with --git-password-file)")
	f.StringVar(&ro.gitPasswordFile, "git-password-file", "", "a file holding the HTTPS basic-auth password or token")
	f.StringVar(&ro.gitTokenFile, "git-token-file", "", "a file holding an HTTPS bearer token")
	f.StringVar(&opts.ResyncSchedule, "resync-schedule", opts.ResyncSchedule, `cron spec ("0 * * * *", "@hourly", "@every 10m") of full recomputes that repair drift no event reported; "" turns them off`)
	return cmd
}
