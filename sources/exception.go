package sources

import (
	"context"
	"fmt"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic/dynamicinformer"
	"k8s.io/client-go/tools/cache"

	apiv1 "github.com/sprout-gitops/sprout/api/policies/v1"
	"github.com/sprout-gitops/sprout/celenv"
)

// Exception is a PolicyException as a source hands it over, compiled once
// where it entered.
type Exception struct {
	*apiv1.PolicyException
	// Source names where the exception came from, as for a Policy.
	Source string
	// Compiled is the exception compiled; for one that does not compile,
	// a stand-in that fails every trigger it is checked for
	// (celenv.FailingException), and Err says why.
	Compiled *celenv.Exception
	Err      error
}

// ExceptionHandler is a Handler that also takes PolicyExceptions. A source
// hands it every exception it holds at each change, and a polled source
// hands them before the policies of the same revision, so that no policy
// runs without the exceptions that came with it.
type ExceptionHandler interface {
	// Exceptions replaces every exception of the source with these.
	Exceptions(source string, exceptions []Exception)
}

// CompileException compiles e once, where it enters. One that does not
// compile comes with its error and a stand-in that fails every trigger it
// is checked for.
func CompileException(e *apiv1.PolicyException, source string) Exception {
	c, err := celenv.CompileException(e)
	if err != nil {
		c = celenv.FailingException(e.Namespace+"/"+e.Name, err)
	}
	return Exception{PolicyException: e, Source: source, Compiled: c, Err: err}
}

// Applying returns the compiled exceptions of list that name p and have
// not expired at now, in the order of list, and the soonest time one of
// them expires (zero when none does), after which the set must be made
// again. The controller and sprout render select a policy's exceptions
// with it alike.
func Applying(list []Exception, p apiv1.Policy, now time.Time) (applying []*celenv.Exception, until time.Time) {
	for _, e := range list {
		if !e.AppliesTo(p) || e.Expired(now) {
			continue
		}
		applying = append(applying, e.Compiled)
		if at := e.Spec.ExpiresAt; at != nil && (until.IsZero() || at.Time.Before(until)) {
			until = at.Time
		}
	}
	return applying, until
}

// handExceptions hands a source's exceptions to h, if h takes them.
func handExceptions(h Handler, source string, exceptions []Exception) {
	if eh, ok := h.(ExceptionHandler); ok {
		eh.Exceptions(source, exceptions)
	}
}

// ReadExceptions makes the source also watch the PolicyExceptions of
// namespace ("" or "*": of every namespace, as Kyverno's
// --exceptionNamespace) and hand them to its handler. Call it before Start.
func (c *Cluster) ReadExceptions(namespace string) {
	if namespace == "*" {
		namespace = ""
	}
	c.exceptions = &clusterExceptions{namespace: namespace, byUID: map[types.UID]Exception{}}
}

// clusterExceptions are the PolicyExceptions in the cluster, each
// generation compiled once.
type clusterExceptions struct {
	namespace string
	mu        sync.Mutex
	byUID     map[types.UID]Exception
}

// startExceptions starts the informer on PolicyExceptions, if asked for
// and h takes them: every event hands h the whole set again, which the
// informer's store holds.
func (c *Cluster) startExceptions(ctx context.Context, h Handler) error {
	if c.exceptions == nil {
		return nil
	}
	if _, ok := h.(ExceptionHandler); !ok {
		return nil
	}
	inf := dynamicinformer.NewFilteredDynamicInformer(c.client, apiv1.PolicyExceptions, c.exceptions.namespace, 0, cache.Indexers{}, nil).Informer()
	deliver := func() { handExceptions(h, ClusterSourceName, c.exceptions.compile(inf.GetStore().List(), h)) }
	reg, err := inf.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    func(any) { deliver() },
		UpdateFunc: func(_, _ any) { deliver() },
		DeleteFunc: func(any) { deliver() },
	})
	if err != nil {
		return fmt.Errorf("watch %s: %w", apiv1.PolicyExceptions.Resource, err)
	}
	c.handlers = append(c.handlers, reg)
	go inf.RunWithContext(ctx)
	return nil
}

// compile returns the exceptions listed, each generation compiled once. One
// that does not decode is reported to h as invalid and left out.
func (ce *clusterExceptions) compile(objs []any, h Handler) []Exception {
	ce.mu.Lock()
	defer ce.mu.Unlock()
	next := make(map[types.UID]Exception, len(objs))
	out := make([]Exception, 0, len(objs))
	for _, obj := range objs {
		u, ok := obj.(*unstructured.Unstructured)
		if !ok {
			continue
		}
		e, ok := ce.byUID[u.GetUID()]
		if !ok || e.Generation != u.GetGeneration() {
			pe, err := apiv1.ExceptionFromUnstructured(u)
			if err != nil {
				h.Invalid(ClusterSourceName, apiv1.PolicyExceptionKind+"/"+u.GetNamespace()+"/"+u.GetName(), err)
				continue
			}
			e = CompileException(pe, ClusterSourceName)
		}
		next[u.GetUID()] = e
		out = append(out, e)
	}
	ce.byUID = next
	return out
}
