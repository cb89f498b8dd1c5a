package reconcile_test

import (
	"context"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/sprout-gitops/sprout/reconcile"
)

// TestParseLimitFailsOnlyItsTrigger: a trigger whose text is over
// yaml.parse's limit fails its own evaluation, and the policy's status names
// the trigger, the field path and the limit; its other triggers, before and
// after, are generated.
func TestParseLimitFailsOnlyItsTrigger(t *testing.T) {
	runController(t, nil)
	tb := newTable(t, "parselimit")
	p := derivedPolicy("parsing", "parselimit", "out", "parsing", true, false)
	p = strings.Replace(p, `"policy": "parsing"`, `"policy": "parsing", "values": string(size(yaml.parse(object.data.value)))`, 1)
	tb.applyPolicy(p)
	t.Cleanup(func() { tb.deletePolicy("parsing") })

	tb.trigger("small", "parselimit", "a: 1")
	tb.trigger("huge", "parselimit", strings.Repeat("- 0123456789abcd\n", 600<<10/17))
	tb.waitFor("the small trigger's object", "small-out", exists)
	var c *metav1.Condition
	poll(t, "the parse limit on the policy's status", func(ctx context.Context) (bool, error) {
		var err error
		c, err = policyCondition(ctx, "parsing")
		return c != nil && c.Reason == reconcile.ReasonEvaluationFailed, err
	})
	want := "trigger ConfigMap parselimit/huge: spec.generate[0].expression: yaml.parse: the text has 614397 bytes, over the limit of 524288"
	if !strings.Contains(c.Message, want) {
		t.Errorf("Ready message %q does not contain %q", c.Message, want)
	}
	tb.trigger("later", "parselimit", "b: 2")
	tb.waitFor("a later trigger's object", "later-out", exists)
	if tb.get("huge-out") != nil {
		t.Error("the huge trigger was generated")
	}
}
