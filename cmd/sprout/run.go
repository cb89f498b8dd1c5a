package main

import (
	"os"

	"github.com/spf13/cobra"
	"k8s.io/klog/v2"

	"github.com/sprout-gitops/sprout/reconcile"
)

func newRunCommand(g *globalFlags) *cobra.Command {
	opts := reconcile.DefaultOptions()
	cmd := &cobra.Command{
		Use:   "run",
		Short: "Run the controller against a cluster",
		Long: `Run the controller: watch GeneratingPolicies and NamespacedGeneratingPolicies
in the cluster and the trigger objects they match, and keep the generated objects
in place. Stops on SIGINT or SIGTERM.`,
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
			opts.Logger = log
			c, err := reconcile.New(cfg, opts)
			if err != nil {
				return err
			}
			log.Info("sprout starting", "host", cfg.Host, "version", version())
			return c.Run(cmd.Context())
		},
	}
	cmd.Flags().IntVar(&opts.Workers, "workers", opts.Workers, "how many policies are synced at once")
	return cmd
}
