package main

import (
	"context"
	"errors"
	"log/slog"
	"net"
	"net/http"
	"net/http/pprof"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	clientmetrics "k8s.io/client-go/tools/metrics"
)

// newRegistry returns the registry `sprout run` serves: the controller's
// series plus the Go runtime's and the process's. client-go's count of
// requests by code, method and host is turned off: controller-runtime's
// init hands it a counter in controller-runtime's own registry, which
// nothing serves, and it looked the counter up by its labels on every
// request (docs/decisions.md).
func newRegistry() *prometheus.Registry {
	clientmetrics.RequestResult = noRequestResults{}
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	return reg
}

// noRequestResults counts nothing, as client-go does by default.
type noRequestResults struct{}

func (noRequestResults) Increment(context.Context, string, string, string) {}

// metricsHandler serves reg at /metrics, uncompressed: the page is small,
// and a gzip compressor, kept between scrapes, holds far more memory than
// the page saves on the wire (docs/decisions.md).
func metricsHandler(reg *prometheus.Registry) http.Handler {
	mux := http.NewServeMux()
	mux.Handle("/metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{Registry: reg, DisableCompression: true}))
	return mux
}

// probesHandler serves /healthz (the process answers) and /readyz (ready
// says why it is not, or "").
func probesHandler(ready func() string) http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("/healthz", func(w http.ResponseWriter, _ *http.Request) {
		_, _ = w.Write([]byte("ok\n"))
	})
	mux.HandleFunc("/readyz", func(w http.ResponseWriter, _ *http.Request) {
		if why := ready(); why != "" {
			http.Error(w, why, http.StatusServiceUnavailable)
			return
		}
		_, _ = w.Write([]byte("ok\n"))
	})
	return mux
}

// pprofHandler serves Go's runtime profiles at /debug/pprof/ (heap, CPU,
// goroutines), for finding what a cluster's load costs (#10). It gets a
// listener of its own, off by default: the profiles show the process's
// internals, and a CPU profile costs CPU while it runs, so opening /metrics
// to a scraper must not open them too.
func pprofHandler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("/debug/pprof/", pprof.Index)
	mux.HandleFunc("/debug/pprof/cmdline", pprof.Cmdline)
	mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
	mux.HandleFunc("/debug/pprof/symbol", pprof.Symbol)
	mux.HandleFunc("/debug/pprof/trace", pprof.Trace)
	return mux
}

// serve serves h on addr until ctx ends; "0" turns it off. It returns once
// the address is bound, so a port taken is an error at start, not a log
// line later.
func serve(ctx context.Context, addr string, h http.Handler, log *slog.Logger, what string) error {
	if addr == "0" || addr == "" {
		return nil
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return err
	}
	srv := &http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second}
	go func() {
		if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			log.Error("server stopped", "serving", what, "error", err.Error())
		}
	}()
	go func() {
		<-ctx.Done()
		// ctx is done: the shutdown has its own bound.
		shutdown, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
		defer cancel()
		_ = srv.Shutdown(shutdown)
	}()
	log.Info("serving "+what, "address", "http://"+ln.Addr().String())
	return nil
}
