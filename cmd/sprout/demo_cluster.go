//go:build demo

package main

import (
	"context"
	"errors"
	"fmt"
	"io"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	"github.com/sprout-gitops/sprout/fixtures"
	"github.com/sprout-gitops/sprout/internal/controlplane"
	"github.com/sprout-gitops/sprout/internal/manifest"
)

// The demo on a cluster of the user's (--existing-cluster, `make
// run-cluster`): no control plane is started, so nothing is built. It
// must leave the cluster as it found it: the CRDs it lacks are installed
// and those it has are left alone (Kyverno's may be there), a scenario
// whose triggers already exist is refused rather than taken over, and the
// triggers and policy the demo applied are deleted when it ends.

var crdsResource = apiextensionsv1.SchemeGroupVersion.WithResource("customresourcedefinitions")

// startExistingCluster prepares the cluster of cfg for scenario: the CRDs
// it lacks installed, and none of the scenario's objects there yet.
func startExistingCluster(ctx context.Context, out io.Writer, cfg *rest.Config, scenario string) error {
	fmt.Fprintf(out, "running on the cluster at %s (no local control plane)\n", cfg.Host)
	crds, err := controlplane.SproutCRDs.CRDs()
	if err != nil {
		return err
	}
	client, err := dynamic.NewForConfig(cfg)
	if err != nil {
		return err
	}
	var missing []*apiextensionsv1.CustomResourceDefinition
	for _, crd := range crds {
		_, err := client.Resource(crdsResource).Get(ctx, crd.Name, metav1.GetOptions{})
		switch {
		case apierrors.IsNotFound(err):
			missing = append(missing, crd)
		case err != nil:
			return fmt.Errorf("CRD %s: %w", crd.Name, err)
		}
	}
	if len(missing) > 0 {
		if _, err := envtest.InstallCRDs(cfg, envtest.CRDInstallOptions{CRDs: missing}); err != nil {
			return fmt.Errorf("install CRDs: %w", err)
		}
		for _, crd := range missing {
			fmt.Fprintf(out, "installed CRD %s (left in place at the end)\n", crd.Name)
		}
	}
	applier, err := manifest.NewApplier(cfg)
	if err != nil {
		return err
	}
	for _, obj := range scenarioObjects(scenario) {
		r, err := applier.Resource(obj)
		if err != nil {
			return err
		}
		_, err = r.Get(ctx, obj.GetName(), metav1.GetOptions{})
		if err == nil {
			return fmt.Errorf("%s %s exists already: the demo creates and deletes its own, so it does not run on this cluster", obj.GetKind(), obj.GetName())
		}
		if !apierrors.IsNotFound(err) {
			return err
		}
	}
	return nil
}

// stopExistingCluster deletes what the demo applied to the cluster of cfg.
func stopExistingCluster(out io.Writer, cfg *rest.Config, scenario string) error {
	applier, err := manifest.NewApplier(cfg)
	if err != nil {
		return err
	}
	var errs []error
	for _, obj := range scenarioObjects(scenario) {
		r, err := applier.Resource(obj)
		if err == nil {
			err = r.Delete(context.Background(), obj.GetName(), metav1.DeleteOptions{})
		}
		if err != nil && !apierrors.IsNotFound(err) {
			errs = append(errs, fmt.Errorf("delete %s %s: %w", obj.GetKind(), obj.GetName(), err))
		}
	}
	fmt.Fprintln(out, "deleted the demo's triggers and policy; the records of its policies (kubectl get pinv) are left for you to delete")
	return errors.Join(errs...)
}

// scenarioObjects are the objects the demo applies for scenario.
func scenarioObjects(scenario string) []*unstructured.Unstructured {
	var objs []*unstructured.Unstructured
	for _, file := range []string{"policy.yaml", "triggers.yaml"} {
		got, err := fixtures.Objects(scenario, file)
		if err == nil {
			objs = append(objs, got...)
		}
	}
	return objs
}
