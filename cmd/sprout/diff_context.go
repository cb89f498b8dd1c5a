package main

import (
	"context"
	"log/slog"
	"time"

	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/rest"

	"github.com/sprout-gitops/sprout/globalctx"
	"github.com/sprout-gitops/sprout/reconcile"
	"github.com/sprout-gitops/sprout/sources"
)

// readClusterExceptions makes the cluster sources among srcs watch the
// PolicyExceptions, when they are on: diff wraps its sources, which hides
// them from the controller that would ask them itself.
func readClusterExceptions(srcs []sources.Source, opts reconcile.Options) {
	if !opts.PolicyExceptions {
		return
	}
	for _, src := range srcs {
		if cs, ok := src.(*sources.Cluster); ok {
			cs.ReadExceptions(opts.ExceptionNamespace)
		}
	}
}

// forwardExceptions hands a source's exceptions on to h, if h takes them:
// diff's handlers filter policies, never the exceptions that name them.
func forwardExceptions(h sources.Handler, source string, list []sources.Exception) {
	if eh, ok := h.(sources.ExceptionHandler); ok {
		eh.Exceptions(source, list)
	}
}

// Exceptions passes the source's exceptions on.
func (h selectedHandler) Exceptions(source string, list []sources.Exception) {
	forwardExceptions(h.Handler, source, list)
}

// Exceptions passes the source's exceptions on.
func (h previewHandler) Exceptions(source string, list []sources.Exception) {
	forwardExceptions(h.Handler, source, list)
}

// servePlanEntries serves the cluster's GlobalContextEntries to diff's
// plan until ctx ends, as `sprout run` serves them but writing no status
// and calling no URL, and waits until they are listed, or cannot be: a plan
// is one sync, which must not read them before.
func servePlanEntries(ctx context.Context, cfg *rest.Config, log *slog.Logger) (*globalctx.Store, error) {
	dyn, err := dynamic.NewForConfig(cfg)
	if err != nil {
		return nil, err
	}
	store := globalctx.New(globalctx.Options{Client: dyn, Logger: log})
	go store.Run(ctx)
	err = wait.PollUntilContextCancel(ctx, 50*time.Millisecond, true, func(context.Context) (bool, error) {
		listed, listErr := store.Listed()
		return listed || listErr != nil, nil
	})
	return store, err
}
