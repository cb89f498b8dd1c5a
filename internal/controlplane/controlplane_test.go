package controlplane_test

import (
	"context"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/rest"

	apiv1 "github.com/sprout-gitops/sprout/api/policies/v1"
	"github.com/sprout-gitops/sprout/internal/controlplane"
)

var cfg *rest.Config

func TestMain(m *testing.M) { controlplane.Main(m, &cfg) }

func TestCRDsServeEveryVersion(t *testing.T) {
	client := dynamic.NewForConfigOrDie(cfg)
	for _, v := range apiv1.ServedVersions {
		gvr := apiv1.GeneratingPolicies.GroupVersion().WithResource("generatingpolicies")
		gvr.Version = v
		if _, err := client.Resource(gvr).List(context.Background(), metav1.ListOptions{}); err != nil {
			t.Errorf("list %s: %v", gvr, err)
		}
	}
}
