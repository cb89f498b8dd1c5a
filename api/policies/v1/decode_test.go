package v1

import (
	"strings"
	"testing"
)

// kyvernoPolicy is a policy as Kyverno documents it, with every field
// Kyverno's CRD declares and the values its defaults store.
const kyvernoPolicy = `apiVersion: policies.kyverno.io/v1
kind: GeneratingPolicy
metadata:
  name: kyverno
spec:
  matchConstraints:
    resourceRules:
    - apiGroups: [""]
      apiVersions: ["v1"]
      operations: ["CREATE"]
      resources: ["namespaces"]
  evaluation:
    admission:
      enabled: true
    generateExisting:
      enabled: false
    synchronize:
      enabled: true
    orphanDownstreamOnPolicyDelete:
      enabled: false
    skipBackgroundRequests: SKIP
  useServerSideApply: true
  auditAnnotations:
  - key: generated
    valueExpression: "'yes'"
  webhookConfiguration:
    timeoutSeconds: 10
  generate:
  - template:
      interpolate: none
      value: |
        apiVersion: v1
        kind: ConfigMap
        metadata:
          name: x
`

// TestDecodeKyvernoFields reads skipBackgroundRequests as Kyverno's CRDs
// store it (a boolean, true by default) and as Sprout's stored it (an
// object), and Kyverno's useServerSideApply and auditAnnotations.
func TestDecodeKyvernoFields(t *testing.T) {
	tests := []struct {
		skip    string
		want    bool
		wantErr string
	}{
		{skip: "true", want: true},
		{skip: "false", want: false},
		{skip: "{enabled: true}", want: true},
		{skip: "{enabled: false}", want: false},
		{skip: "{}", want: true},
		{skip: "3", wantErr: "spec.evaluation.skipBackgroundRequests: number where true or false is wanted"},
		{skip: `"yes"`, wantErr: "spec.evaluation.skipBackgroundRequests: string where true or false is wanted"},
		{skip: "{enable: false}", wantErr: "spec.evaluation.skipBackgroundRequests: object where true or false is wanted"},
	}
	for _, tt := range tests {
		t.Run(tt.skip, func(t *testing.T) {
			ps, err := Decode([]byte(strings.Replace(kyvernoPolicy, "SKIP", tt.skip, 1)))
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("error %v, want one containing %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			spec := ps[0].PolicySpec()
			if got := spec.EvaluationConfiguration.SkipBackgroundRequests; got == nil || bool(*got) != tt.want {
				t.Errorf("skipBackgroundRequests %v, want %v", got, tt.want)
			}
			if !spec.UseServerSideApply || len(spec.AuditAnnotations) != 1 || spec.AuditAnnotations[0].Key != "generated" {
				t.Errorf("useServerSideApply %v, auditAnnotations %v: not read", spec.UseServerSideApply, spec.AuditAnnotations)
			}
			if !spec.Synchronize() || spec.GenerateExisting() || spec.OrphanDownstreamOnPolicyDelete() {
				t.Error("the evaluation switches read wrong")
			}
		})
	}
}
