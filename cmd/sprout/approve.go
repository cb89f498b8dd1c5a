package main

import (
	"fmt"
	"time"

	"github.com/spf13/cobra"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	apiv1 "github.com/sprout-gitops/sprout/api/policies/v1"
	"github.com/sprout-gitops/sprout/reconcile"
	"github.com/sprout-gitops/sprout/reconcile/blast"
)

func newApproveCommand(g *globalFlags) *cobra.Command {
	o := dayTwoOptions{}
	var revision string
	cmd := &cobra.Command{
		Use:   "approve POLICY",
		Short: "Let a revision held by the blast-radius guard write, sync it and print what changed",
		Long: `Approve the current revision of a policy stored in the cluster whose deletions and
overwrites the blast-radius guard holds (its Stalled condition says BlastRadiusExceeded):
set its sprout.dev/approved-revision annotation to the revision, a hash of its spec, and
request a sync, then wait for it and print what it changed, as ` + "`sprout reconcile`" + ` does.
--revision makes sure the revision approved is the one reviewed (the Stalled message and
` + "`sprout diff`" + ` name it): a spec changed since is refused. A policy from Git or a folder is
approved there, with the annotation the Stalled message gives.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return runDayTwo(cmd.Context(), cmd.OutOrStdout(), g, o, args[0], func(p *policyClient, now time.Time) (map[string]any, string, error) {
				rev, err := revisionOf(p)
				if err != nil {
					return nil, "", err
				}
				if revision != "" && revision != rev {
					return nil, "", fmt.Errorf("--revision %s: %s is at revision %s now: review it again (sprout diff)", revision, p.id, rev)
				}
				fmt.Fprintf(cmd.OutOrStdout(), "%s: revision %s approved\n", p.id, rev)
				token := requestToken(now)
				return map[string]any{blast.AnnotationApprovedRevision: rev, reconcile.AnnotationReconcileRequest: token}, token, nil
			})
		},
	}
	addDayTwoFlags(cmd, &o)
	cmd.Flags().StringVar(&revision, "revision", "", "the revision to approve; refused if the policy is at another")
	return cmd
}

// revisionOf is the content revision of the policy p reaches, as Sprout
// computes it.
func revisionOf(p *policyClient) (string, error) {
	u, ok := p.live.(*unstructured.Unstructured)
	if !ok {
		return "", fmt.Errorf("%s: read as %T", p.id, p.live)
	}
	policy, err := apiv1.FromUnstructured(u)
	if err != nil {
		return "", fmt.Errorf("%s: %w", p.id, err)
	}
	return blast.Revision(policy), nil
}
