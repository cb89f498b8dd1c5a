package main

import (
	"context"
	"errors"
	"fmt"
	"hash/fnv"
	"log/slog"
	"os"
	"strings"
	"sync/atomic"
	"time"

	"github.com/google/uuid"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/leaderelection"
	"k8s.io/client-go/tools/leaderelection/resourcelock"
)

// leaderOptions configure leader election between replicas.
type leaderOptions struct {
	enabled       bool
	namespace     string
	name          string
	leaseDuration time.Duration
	renewDeadline time.Duration
	retryPeriod   time.Duration
}

// shardOf names the shard of the policies a selector picks, as Flux's
// controllers name the lease of a shard: a digest of the selector, so that
// each shard elects its own leader, and every replica of one shard,
// started with the same selector, the same. "" for no selector: one
// replica for every policy.
func shardOf(selector string) string {
	if selector == "" {
		return ""
	}
	h := fnv.New32a()
	_, _ = h.Write([]byte(selector))
	return fmt.Sprintf("%08x", h.Sum32())
}

// errLeadershipLost ends a replica that lost its lease: another may already
// be writing, so it must stop and start again as a candidate.
var errLeadershipLost = errors.New("leader election lost")

// leaderElector runs the controller only while this replica holds the
// Lease. Stopping (SIGTERM) first stops the controller, so writes under way
// finish, and only then releases the Lease, so the next replica never
// writes alongside it.
type leaderElector struct {
	opts    leaderOptions
	log     *slog.Logger
	leading atomic.Bool
}

// run calls controller with a context that ends when ctx does or the Lease
// is lost, while this replica leads; without leader election, at once.
func (l *leaderElector) run(ctx context.Context, cfg *rest.Config, controller func(context.Context) error) error {
	if !l.opts.enabled {
		l.leading.Store(true)
		return controller(ctx)
	}
	kube, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return err
	}
	host, _ := os.Hostname()
	id := host + "_" + uuid.NewString()
	lock := &resourcelock.LeaseLock{
		LeaseMeta:  metav1.ObjectMeta{Namespace: l.opts.namespace, Name: l.opts.name},
		Client:     kube.CoordinationV1(),
		LockConfig: resourcelock.ResourceLockConfig{Identity: id},
	}
	// The elector's context ends after the controller has stopped: its end
	// releases the Lease.
	electing, stopElecting := context.WithCancel(context.Background())
	defer stopElecting()
	stopWhenIdle := context.AfterFunc(ctx, func() {
		if !l.leading.Load() {
			stopElecting()
		}
	})
	defer stopWhenIdle()

	var runErr error
	var started atomic.Bool
	ran := make(chan struct{})
	elector, err := leaderelection.NewLeaderElector(leaderelection.LeaderElectionConfig{
		Lock:            lock,
		Name:            l.opts.name,
		LeaseDuration:   l.opts.leaseDuration,
		RenewDeadline:   l.opts.renewDeadline,
		RetryPeriod:     l.opts.retryPeriod,
		ReleaseOnCancel: true,
		Callbacks: leaderelection.LeaderCallbacks{
			OnStartedLeading: func(lead context.Context) {
				started.Store(true)
				defer stopElecting() // last: releases the Lease
				defer close(ran)
				l.leading.Store(true)
				defer l.leading.Store(false)
				l.log.Info("leading", "lease", l.opts.namespace+"/"+l.opts.name, "identity", id)
				runCtx, cancel := context.WithCancel(lead)
				defer cancel()
				stop := context.AfterFunc(ctx, cancel)
				defer stop()
				runErr = controller(runCtx)
				if ctx.Err() == nil && runErr == nil {
					runErr = errLeadershipLost
				}
			},
			OnStoppedLeading: func() {},
			OnNewLeader: func(identity string) {
				if identity != id {
					l.log.Info("standing by", "leader", identity)
				}
			},
		},
	})
	if err != nil {
		return fmt.Errorf("leader election: %w", err)
	}
	l.log.Info("waiting for the lease", "lease", l.opts.namespace+"/"+l.opts.name, "identity", id)
	elector.Run(electing)
	if !started.Load() {
		return nil // stopped while standing by
	}
	<-ran // the Lease may be released or lost before the controller stopped
	return runErr
}

// ready says why this replica is not ready, or "". A standby replica is
// ready: it serves probes and waits for the Lease.
func (l *leaderElector) ready(synced func() bool) string {
	switch {
	case l.opts.enabled && !l.leading.Load():
		return ""
	case !synced():
		return "caches not synced"
	}
	return ""
}

// inClusterNamespace is the namespace of the pod Sprout runs in, or "".
func inClusterNamespace() string {
	b, err := os.ReadFile("/var/run/secrets/kubernetes.io/serviceaccount/namespace")
	if err != nil {
		return ""
	}
	return strings.TrimSpace(string(b))
}
