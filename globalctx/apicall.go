package globalctx

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"time"

	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/rest"

	"github.com/sprout-gitops/sprout/api/kyverno/v2beta1"
	"github.com/sprout-gitops/sprout/celenv"
)

// maxErrorBodyBytes bounds the part of a failed call's answer an error
// quotes.
const maxErrorBodyBytes = 256

// callSource serves an apiCall entry: the call is made at the entry's
// refresh interval, each refresh tried up to its retry limit, as Kyverno
// polls it. The data is the answer's JSON. A service is called through
// the http rules of policies (allowed hosts, timeout, response size); a
// urlPath is read from the API server with Sprout's rights, all but the
// Secret that holds Sprout's proof key.
type callSource struct {
	// what names the call in errors: its method and URL or path.
	what     string
	fetch    func(ctx context.Context) (raw []byte, status int, err error)
	interval time.Duration
	tries    int
}

func newCallSource(web *celenv.HTTP, api rest.Interface, key KeyHolder, c *v2beta1.ExternalAPICall) (callSource, error) {
	src := callSource{interval: c.Interval(), tries: c.Tries()}
	if c.URLPath != "" {
		return src.readPath(api, key, c.URLPath)
	}
	call := celenv.HTTPCall{Method: c.Method, URL: c.Service.URL, CABundle: c.Service.CABundle, Headers: map[string]string{}}
	if call.Method == "" {
		call.Method = "GET"
	}
	for _, h := range c.Service.Headers {
		call.Headers[h.Key] = h.Value
	}
	if len(c.Data) > 0 {
		body := map[string]json.RawMessage{}
		for _, d := range c.Data {
			if d.Value != nil {
				body[d.Key] = d.Value.Raw
			}
		}
		raw, err := json.Marshal(body)
		if err != nil {
			return callSource{}, fmt.Errorf("spec.apiCall.data: %w", err)
		}
		call.Body = raw
		call.Headers["Content-Type"] = "application/json"
	}
	src.what = call.Method + " " + call.URL
	src.fetch = func(ctx context.Context) ([]byte, int, error) {
		if web == nil {
			return nil, 0, errors.New("no host is allowed (the operator allows hosts with --http-allowed-hosts)")
		}
		return web.Fetch(ctx, call)
	}
	return src, nil
}

// readPath makes src read urlPath from the API server, with its query as
// parameters, as kubectl get --raw reads it; the proof key is kept out
// (keyGuard).
func (c callSource) readPath(api rest.Interface, key KeyHolder, urlPath string) (callSource, error) {
	u, info, err := (&v2beta1.ExternalAPICall{URLPath: urlPath}).Request()
	if err != nil {
		return callSource{}, fmt.Errorf("spec.apiCall.urlPath: %w", err)
	}
	guard, err := newKeyGuard(key, u, info)
	if err != nil {
		return callSource{}, err
	}
	c.what = "GET " + urlPath
	c.fetch = func(ctx context.Context) ([]byte, int, error) {
		if err := guard.hidden(); err != nil {
			return nil, http.StatusNotFound, err
		}
		if api == nil {
			return nil, 0, errors.New("no client for the API server")
		}
		req := api.Get().AbsPath(u.Path)
		for name, values := range u.Query() {
			for _, v := range values {
				req = req.Param(name, v)
			}
		}
		var status int
		raw, err := req.Do(ctx).StatusCode(&status).Raw()
		if err == nil {
			raw, err = guard.filter(raw)
		}
		return raw, status, err
	}
	return c, nil
}

func (c callSource) run(ctx context.Context, s sink) {
	var last []byte
	var lastErr string
	wait.UntilWithContext(ctx, func(ctx context.Context) {
		raw, err := c.refresh(ctx)
		switch {
		case ctx.Err() != nil:
			return
		case err != nil:
			if err.Error() != lastErr {
				last, lastErr = nil, err.Error()
				s.loaded(nil, err)
			}
			return
		}
		if lastErr != "" || last == nil || !bytes.Equal(raw, last) {
			var data any
			if err := json.Unmarshal(raw, &data); err != nil {
				last, lastErr = nil, "the answer is not JSON"
				s.loaded(nil, fmt.Errorf("%s: the answer is not JSON: %w", c.what, err))
				return
			}
			last, lastErr = raw, ""
			s.loaded(data, nil)
		}
		s.refreshed()
	}, c.interval)
}

// refresh makes the call, tried up to c.tries times with Kyverno's backoff.
func (c callSource) refresh(ctx context.Context) ([]byte, error) {
	var raw []byte
	var err error
	backoff := wait.Backoff{Duration: 10 * time.Millisecond, Factor: 1, Jitter: 0.1, Steps: c.tries}
	_ = wait.ExponentialBackoffWithContext(ctx, backoff, func(ctx context.Context) (bool, error) {
		var status int
		raw, status, err = c.fetch(ctx)
		if err == nil && (status < 200 || status > 299) {
			err = fmt.Errorf("HTTP %d: %s", status, truncate(raw))
		}
		return err == nil, nil
	})
	if err != nil {
		return nil, fmt.Errorf("%s: %w", c.what, err)
	}
	return raw, nil
}

func truncate(raw []byte) string {
	if len(raw) > maxErrorBodyBytes {
		return string(raw[:maxErrorBodyBytes]) + "…"
	}
	return string(raw)
}
