// Package controlplane starts a real kube-apiserver and etcd from the
// repository's bin/ folder (built by `make tools`) with controller-runtime's
// envtest, and installs Sprout's CRDs, or Kyverno's policy CRDs in their place
// (SPROUT_TEST_CRDS=kyverno, see CRDSet). Tests share one control plane per
// test package through Main; the demo starts one with Start.
//
// It lives under internal/ because it is a harness, not part of Sprout's API:
// the tests of every package and the `sprout demo` command use it.
package controlplane

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
)

// ControlPlane is a running kube-apiserver and etcd.
type ControlPlane struct {
	// Config reaches the API server as a cluster administrator.
	Config *rest.Config
	env    *envtest.Environment
	// certs holds the API server's serving certificates, kept across a
	// restart so that Config and kubeconfigs keep working.
	certs string
}

// Start starts etcd and kube-apiserver and installs the CRDs of deploy/crds,
// or Kyverno's policy CRDs in their place when $SPROUT_TEST_CRDS says so.
// Stop removes every process and temporary directory it made.
func Start() (*ControlPlane, error) {
	set, err := CRDsFromEnv()
	if err != nil {
		return nil, err
	}
	return StartWith(set)
}

// StartWith is Start with the policy CRDs of set.
func StartWith(set CRDSet) (*ControlPlane, error) {
	assets, err := Binaries()
	if err != nil {
		return nil, err
	}
	crds, err := set.CRDs()
	if err != nil {
		return nil, err
	}
	gctx, err := KyvernoGlobalContextCRD()
	if err != nil {
		return nil, err
	}
	crds = append(crds, gctx)
	// envtest makes new serving certificates in a new folder at every
	// start of the API server unless given a folder: one of ours survives
	// StopAPIServer.
	certs, err := os.MkdirTemp("", "sprout-apiserver-")
	if err != nil {
		return nil, err
	}
	env := &envtest.Environment{
		BinaryAssetsDirectory: assets,
		CRDs:                  crds,
	}
	// envtest gives each start 20 s, which a cold kube-apiserver can
	// exceed on a small machine busy compiling and fuzzing beside the
	// tests. $KUBEBUILDER_CONTROLPLANE_START_TIMEOUT still rules when set.
	if os.Getenv("KUBEBUILDER_CONTROLPLANE_START_TIMEOUT") == "" {
		env.ControlPlaneStartTimeout = 2 * time.Minute
	}
	env.ControlPlane.APIServer = &envtest.APIServer{CertDir: certs}
	// Without a grace period for watches, a stopping API server waits for
	// open watches to end by themselves, a minute or more.
	env.ControlPlane.APIServer.Configure().Set("shutdown-watch-termination-grace-period", "2s")
	cfg, err := env.Start()
	if err != nil {
		_ = os.RemoveAll(certs)
		return nil, fmt.Errorf("start control plane: %w", err)
	}
	return &ControlPlane{Config: cfg, env: env, certs: certs}, nil
}

// Stop stops the API server and etcd and removes their data.
func (c *ControlPlane) Stop() error {
	err := c.env.Stop()
	return errors.Join(err, os.RemoveAll(c.certs))
}

// StopAPIServer stops kube-apiserver, leaving etcd running: clients get
// connection refused until StartAPIServer.
func (c *ControlPlane) StopAPIServer() error {
	return c.env.ControlPlane.APIServer.Stop()
}

// StartAPIServer starts kube-apiserver again after StopAPIServer, on the
// same address, with the same certificates and the same etcd, so every
// client of the first one can reach it (once it reports healthy).
func (c *ControlPlane) StartAPIServer() error {
	return c.env.ControlPlane.APIServer.Start()
}

// Kubeconfig returns a kubeconfig for a cluster administrator, for
// processes (the sprout binary, kubectl) that cannot share Config.
func (c *ControlPlane) Kubeconfig() ([]byte, error) {
	user, err := c.env.AddUser(envtest.User{Name: "sprout-admin", Groups: []string{"system:masters"}}, nil)
	if err != nil {
		return nil, err
	}
	return user.KubeConfig()
}

// Binaries finds the folder holding kube-apiserver and etcd: $KUBEBUILDER_ASSETS
// when set, else bin/ of the repository around the working directory, else
// the folder of the running executable (bin/sprout next to them).
func Binaries() (string, error) {
	if dir := os.Getenv("KUBEBUILDER_ASSETS"); dir != "" {
		return dir, hasBinaries(dir)
	}
	var candidates []string
	if dir, err := os.Getwd(); err == nil {
		for {
			if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
				candidates = append(candidates, filepath.Join(dir, "bin"))
				break
			}
			parent := filepath.Dir(dir)
			if parent == dir {
				break
			}
			dir = parent
		}
	}
	if exe, err := os.Executable(); err == nil {
		candidates = append(candidates, filepath.Dir(exe))
	}
	for _, dir := range candidates {
		if hasBinaries(dir) == nil {
			return dir, nil
		}
	}
	return "", fmt.Errorf("kube-apiserver and etcd not found in %v: run `make tools` in the repository", candidates)
}

func hasBinaries(dir string) error {
	for _, b := range []string{"kube-apiserver", "etcd"} {
		if _, err := os.Stat(filepath.Join(dir, b)); err != nil {
			return fmt.Errorf("%s not found in %s: run `make tools` first", b, dir)
		}
	}
	return nil
}
