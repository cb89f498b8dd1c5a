package controlplane

import (
	"fmt"
	"os"
	"testing"

	"k8s.io/client-go/rest"
)

// Main runs a test package against one shared control plane: it starts it,
// stores its config in *cfg, runs the tests and stops it. Call it from TestMain.
func Main(m *testing.M, cfg **rest.Config) {
	os.Exit(run(m, cfg))
}

func run(m *testing.M, cfg **rest.Config) int {
	cp, err := Start()
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer func() {
		if err := cp.Stop(); err != nil {
			fmt.Fprintln(os.Stderr, "stop control plane:", err)
		}
	}()
	*cfg = cp.Config
	return m.Run()
}
