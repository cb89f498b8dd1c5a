package main

import (
	"fmt"
	"time"

	"github.com/spf13/cobra"

	"github.com/sprout-gitops/sprout/reconcile"
)

func newSuspendCommand(g *globalFlags) *cobra.Command {
	o := dayTwoOptions{}
	cmd := &cobra.Command{
		Use:   "suspend POLICY",
		Short: "Stop a policy writing and pruning until it is resumed",
		Long: `Suspend a policy stored in the cluster, as ` + "`flux suspend`" + ` does: set its
sprout.dev/suspend annotation to "true". While suspended the policy generates, updates
and prunes nothing, and its Ready condition says Suspended (Stalled too, so health
checks report it). Deleted while suspended, it leaves its objects in place.
` + "`sprout resume`" + ` undoes it.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			err := runDayTwo(cmd.Context(), cmd.OutOrStdout(), g, o, args[0], func(*policyClient, time.Time) (map[string]any, string, error) {
				return map[string]any{reconcile.AnnotationSuspend: "true"}, "", nil
			})
			if err == nil {
				fmt.Fprintf(cmd.OutOrStdout(), "%s suspended\n", args[0])
			}
			return err
		},
	}
	addDayTwoFlags(cmd, &o)
	return cmd
}

func newResumeCommand(g *globalFlags) *cobra.Command {
	o := dayTwoOptions{}
	cmd := &cobra.Command{
		Use:   "resume POLICY",
		Short: "Resume a suspended policy, sync it and print what changed",
		Long: `Resume a policy suspended with ` + "`sprout suspend`" + `: remove its sprout.dev/suspend
annotation and request a sync, as ` + "`flux resume`" + ` does, then wait for it and print
what it changed, as ` + "`sprout reconcile`" + ` does: what was created or deleted
meanwhile is caught up.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return runDayTwo(cmd.Context(), cmd.OutOrStdout(), g, o, args[0], func(_ *policyClient, now time.Time) (map[string]any, string, error) {
				token := requestToken(now)
				return map[string]any{reconcile.AnnotationSuspend: nil, reconcile.AnnotationReconcileRequest: token}, token, nil
			})
		},
	}
	addDayTwoFlags(cmd, &o)
	return cmd
}
