// Command sprout runs Kyverno-compatible GeneratingPolicies without admission
// webhooks: it watches trigger objects and keeps the objects the policies
// generate in the cluster.
package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/signal"
	"syscall"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := newRootCommand().ExecuteContext(ctx); err != nil {
		if !errors.Is(err, errDifferences) { // the diff said it all
			fmt.Fprintln(os.Stderr, "Error:", err)
		}
		stop()
		os.Exit(exitCode(err))
	}
}
