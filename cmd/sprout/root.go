package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
)

// globalFlags are the flags every command shares, named as kubectl names them.
type globalFlags struct {
	kubeconfig string
	context    string
	logLevel   string
	logFormat  string
	// qps and burst bound the client's requests per second; 0 keeps
	// client-go's default (5 and 10). Only `sprout run` sets them.
	qps   float32
	burst int
	// requestTimeout bounds each request, as kubectl's --request-timeout
	// does; 0 waits as long as the connection lasts.
	requestTimeout time.Duration
}

func newRootCommand() *cobra.Command {
	g := &globalFlags{}
	root := &cobra.Command{
		Use:   "sprout",
		Short: "Run Kyverno GeneratingPolicies without webhooks",
		Long: `Sprout runs Kyverno-compatible GeneratingPolicy and NamespacedGeneratingPolicy
resources as a level-triggered controller: it watches trigger objects, computes
what every policy wants and applies it with server-side apply.`,
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	f := root.PersistentFlags()
	f.StringVar(&g.kubeconfig, "kubeconfig", "", "path to the kubeconfig file (default: $KUBECONFIG, ~/.kube/config, then in-cluster)")
	f.StringVar(&g.context, "context", "", "the kubeconfig context to use (default: its current context)")
	f.StringVar(&g.logLevel, "log-level", "info", "log level: debug, info, warn or error")
	f.StringVar(&g.logFormat, "log-format", "text", "log format: text or json")
	f.DurationVar(&g.requestTimeout, "request-timeout", 0, `how long to wait for one request to the API server before giving up ("10s", "1m"); 0 waits as long as the connection lasts`)
	root.AddCommand(newRunCommand(g), newRenderCommand(), newDiffCommand(g), newInventoryCommand(g), newReconcileCommand(g), newSuspendCommand(g), newResumeCommand(g), newApproveCommand(g), newTestCommand(), newVersionCommand())
	for _, c := range optionalCommands {
		root.AddCommand(c(g))
	}
	return root
}

// optionalCommands are commands built in only with a build tag (demo).
var optionalCommands []func(*globalFlags) *cobra.Command

// restConfig loads the cluster configuration the way kubectl does, falling
// back to the in-cluster service account.
func (g *globalFlags) restConfig() (*rest.Config, error) {
	rules := clientcmd.NewDefaultClientConfigLoadingRules()
	rules.ExplicitPath = g.kubeconfig
	cfg, err := clientcmd.NewNonInteractiveDeferredLoadingClientConfig(rules,
		&clientcmd.ConfigOverrides{CurrentContext: g.context}).ClientConfig()
	if clientcmd.IsEmptyConfig(err) {
		cfg, err = rest.InClusterConfig()
		if errors.Is(err, rest.ErrNotInCluster) {
			return nil, fmt.Errorf("no kubeconfig found and not running in a cluster: pass --kubeconfig")
		}
	}
	if err != nil {
		return nil, err
	}
	cfg.UserAgent = "sprout"
	cfg.Timeout = g.requestTimeout
	if g.qps != 0 {
		cfg.QPS, cfg.Burst = g.qps, g.burst
	}
	return cfg, nil
}

// reachable asks the API server for its version: a command that reads the
// cluster once fails here, with the server's address and the error, rather
// than waiting on caches that an unreachable server never fills.
func reachable(cfg *rest.Config) error {
	d, err := discovery.NewDiscoveryClientForConfig(cfg)
	if err != nil {
		return err
	}
	if _, err := d.ServerVersion(); err != nil {
		return fmt.Errorf("API server %s: %w", cfg.Host, err)
	}
	return nil
}

// logger builds the structured logger the flags ask for.
func (g *globalFlags) logger(w io.Writer) (*slog.Logger, error) {
	var level slog.Level
	if err := level.UnmarshalText([]byte(g.logLevel)); err != nil {
		return nil, fmt.Errorf("--log-level: %w", err)
	}
	opts := &slog.HandlerOptions{Level: level}
	switch strings.ToLower(g.logFormat) {
	case "text":
		return slog.New(slog.NewTextHandler(w, opts)), nil
	case "json":
		return slog.New(slog.NewJSONHandler(w, opts)), nil
	}
	return nil, fmt.Errorf("--log-format: %q is neither text nor json", g.logFormat)
}

// clientLogger is log for client-go's own messages (klog). client-go logs
// at Error a response it could not read because its request's context was
// cancelled; Sprout cancels requests itself when it stops, or stops the
// sync of a deleted policy, so those are told at Info.
func clientLogger(log *slog.Logger) *slog.Logger {
	return slog.New(cancelledNotError{log.Handler()})
}

type cancelledNotError struct{ slog.Handler }

func (h cancelledNotError) Handle(ctx context.Context, r slog.Record) error {
	if r.Level >= slog.LevelError && cancelled(r) {
		info := slog.NewRecord(r.Time, slog.LevelInfo, r.Message, r.PC)
		r.Attrs(func(a slog.Attr) bool {
			info.AddAttrs(a)
			return true
		})
		r = info
		if !h.Enabled(ctx, r.Level) {
			return nil
		}
	}
	return h.Handler.Handle(ctx, r)
}

func (h cancelledNotError) WithAttrs(attrs []slog.Attr) slog.Handler {
	return cancelledNotError{h.Handler.WithAttrs(attrs)}
}

func (h cancelledNotError) WithGroup(name string) slog.Handler {
	return cancelledNotError{h.Handler.WithGroup(name)}
}

// cancelled reports whether r carries an error that is a cancelled context.
func cancelled(r slog.Record) bool {
	found := false
	r.Attrs(func(a slog.Attr) bool {
		if err, ok := a.Value.Any().(error); ok && errors.Is(err, context.Canceled) {
			found = true
		}
		return !found
	})
	return found
}
