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
the folders in the order given.`,
		Example: `  sprout run --kubeconfig ~/.kube/config
  sprout run --policy-dir ./policies --poll-interval 30s`,
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
			for _, dir := range ro.policyDirs {
				if info, err := os.Stat(dir); err != nil || !info.IsDir() {
					return fmt.Errorf("--policy-dir %s: not a folder", dir)
				}
				opts.Sources = append(opts.Sources, sources.NewDirectory(dir, ro.pollInterval))
			}
			if len(opts.Sources) == 0 {
				return fmt.Errorf("no policy source: keep --cluster-policies or give --policy-dir")
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
	f.DurationVar(&ro.pollInterval, "poll-interval", ro.pollInterval, "how often policy folders are read again")
	f.StringVar(&opts.ResyncSchedule, "resync-schedule", opts.ResyncSchedule, `cron spec ("0 * * * *", "@hourly", "@every 10m") of full recomputes that repair drift no event reported; "" turns them off`)
	return cmd
}
