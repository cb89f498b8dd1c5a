package reconcile

import (
	"fmt"

	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/rest"

	"github.com/sprout-gitops/sprout/policyreport"
)

// newPolicyReports returns the writer of the controller's PolicyReports, or
// nil when they are off or the controller only plans. It writes with a
// client of its own, without client-side limit (the writer bounds its
// rate itself), so that its writes never take from the rate limit of the
// generated objects'.
func newPolicyReports(cfg *rest.Config, opts Options) (*policyreport.Writer, error) {
	if opts.PolicyReports == nil || opts.DryRun {
		return nil, nil
	}
	o := *opts.PolicyReports
	o.Logger = opts.Logger
	own := rest.CopyConfig(cfg)
	own.QPS, own.RateLimiter = -1, nil
	dyn, err := dynamic.NewForConfig(own)
	if err != nil {
		return nil, fmt.Errorf("PolicyReports: dynamic client: %w", err)
	}
	return policyreport.NewWriter(dyn, o), nil
}

// reportTrigger hands the result of a policy's evaluation for trigger t to
// the report writer, as Kyverno reports it: an error, a skip for an
// excepted trigger, nothing for a trigger the matchConditions skip, and a
// pass otherwise. A tombstone's evaluation is not reported: its report
// goes with it.
func (c *Controller) reportTrigger(cp *compiledPolicy, t trigger, ev evaluation, err error) {
	if c.policyReports == nil || t.deleted || !policyreport.Reported(cp.policy) {
		return
	}
	tr, name := policyreport.TriggerOf(t.object), policyreport.PolicyName(cp.policy)
	switch {
	case err != nil:
		c.policyReports.Set(tr, name, policyreport.Error(cp.policy, err))
	case len(ev.excepted) > 0:
		c.policyReports.Set(tr, name, policyreport.Excepted(cp.policy, ev.excepted, ev.exceptedResult))
	case !ev.matched:
		c.policyReports.Set(tr, name, nil)
	default:
		c.policyReports.Set(tr, name, policyreport.Pass(cp.policy, ev.audit, ev.objects))
	}
}

// reportName is how a policy's results name it.
func (k policyKey) reportName() string {
	if k.Namespace == "" {
		return k.Name
	}
	return k.Namespace + "/" + k.Name
}
