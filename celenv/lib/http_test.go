package lib_test

import (
	"context"
	"encoding/json"
	"encoding/pem"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/sprout-gitops/sprout/celenv"
	"github.com/sprout-gitops/sprout/celenv/internal/celtest"
)

// webServer answers on loopback: /json an object, /list an array, /text
// plain text, /echo the request's method, header X-Team and body, /big
// 600 KiB, /hang nothing until the client gives up, /away a redirect to
// target. hits counts the requests.
func webServer(t *testing.T, target string) (*httptest.Server, *atomic.Int64) {
	t.Helper()
	hits := &atomic.Int64{}
	mux := http.NewServeMux()
	mux.HandleFunc("/json", func(w http.ResponseWriter, _ *http.Request) { _, _ = io.WriteString(w, `{"team": "a", "size": 3}`) })
	mux.HandleFunc("/list", func(w http.ResponseWriter, _ *http.Request) { _, _ = io.WriteString(w, `["a", "b"]`) })
	mux.HandleFunc("/text", func(w http.ResponseWriter, _ *http.Request) {
		w.WriteHeader(http.StatusTeapot)
		_, _ = io.WriteString(w, "not json")
	})
	mux.HandleFunc("/echo", func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		_ = json.NewEncoder(w).Encode(map[string]any{"method": r.Method, "team": r.Header.Get("X-Team"), "body": string(body)})
	})
	mux.HandleFunc("/big", func(w http.ResponseWriter, _ *http.Request) {
		_, _ = io.WriteString(w, `"`+strings.Repeat("x", 600<<10)+`"`)
	})
	mux.HandleFunc("/hang", func(_ http.ResponseWriter, r *http.Request) { <-r.Context().Done() })
	mux.HandleFunc("/away", func(w http.ResponseWriter, r *http.Request) { http.Redirect(w, r, target, http.StatusFound) })
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hits.Add(1)
		mux.ServeHTTP(w, r)
	}))
	t.Cleanup(srv.Close)
	return srv, hits
}

// evalHTTP evaluates expr as the only variable of a policy, with round.
func evalHTTP(t *testing.T, expr string, round *celenv.HTTPRound) (any, celenv.Result, error) {
	t.Helper()
	prog := celenv.Compile(celtest.ExprPolicy(expr))
	if err := prog.Err(); err != nil {
		t.Fatal(err)
	}
	res, err := prog.Evaluate(context.Background(), celenv.Input{
		Object: map[string]any{"apiVersion": "v1", "kind": "Namespace", "metadata": map[string]any{"name": "team"}},
		HTTP:   round,
	})
	if err != nil || len(res.Objects) == 0 {
		return nil, res, err
	}
	data, _ := res.Objects[0].Object.Object["data"].(map[string]any)
	return data["value"], res, nil
}

func TestHTTPCallsReachOnlyAllowedHosts(t *testing.T) {
	other := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { _, _ = io.WriteString(w, "{}") }))
	t.Cleanup(other.Close)
	srv, _ := webServer(t, strings.Replace(other.URL, "127.0.0.1", "localhost", 1))
	web, err := celenv.NewHTTP(celenv.HTTPOptions{AllowedHosts: []string{"127.0.0.1"}, Timeout: 500 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	u := func(path string) string { return `"` + srv.URL + path + `"` }
	tests := []struct {
		name, expr string
		want       any
		wantErr    string
	}{
		{name: "a JSON object gets statusCode", expr: `http.Get(` + u("/json") + `)`, want: map[string]any{"team": "a", "size": 3.0, "statusCode": 200.0}},
		{name: "other JSON under body", expr: `http.Get(` + u("/list") + `)`, want: map[string]any{"body": []any{"a", "b"}, "statusCode": 200.0}},
		{name: "text is a null body", expr: `http.Get(` + u("/text") + `)`, want: map[string]any{"body": nil, "statusCode": 418.0}},
		{name: "headers are sent", expr: `http.Get(` + u("/echo") + `, {"X-Team": "blue"}).team`, want: "blue"},
		{name: "Post sends JSON", expr: `http.Post(` + u("/echo") + `, {"a": [1]}, {"X-Team": "red"})`,
			want: map[string]any{"method": "POST", "team": "red", "body": `{"a":[1]}`, "statusCode": 200.0}},
		{name: "Put", expr: `http.Put(` + u("/echo") + `, "x").method`, want: "PUT"},
		{name: "a host not allowed", expr: `http.Get("` + strings.Replace(other.URL, "127.0.0.1", "localhost", 1) + `")`,
			wantErr: `is not allowed (the operator allows hosts with --http-allowed-hosts)`},
		{name: "a redirect to a host not allowed", expr: `http.Get(` + u("/away") + `)`, wantErr: `the host "localhost:`},
		{name: "another scheme", expr: `http.Get("file:///etc/passwd")`, wantErr: `the scheme "file" is not http or https`},
		{name: "the size limit", expr: `http.Get(` + u("/big") + `)`, wantErr: "the response has more than 524288 bytes"},
		{name: "the timeout", expr: `http.Get(` + u("/hang") + `)`, wantErr: "deadline exceeded"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, res, err := evalHTTP(t, tt.expr, web.Round())
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) || !strings.Contains(err.Error(), "spec.variables[0].expression") {
					t.Fatalf("want an error at its field containing %q, got %v", tt.wantErr, err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
			if res.Reproducible {
				t.Error("a result that called out is reproducible")
			}
		})
	}
	t.Run("no round: nothing is allowed", func(t *testing.T) {
		_, _, err := evalHTTP(t, `http.Get(`+u("/json")+`)`, nil)
		if err == nil || !strings.Contains(err.Error(), "no host is allowed") {
			t.Fatalf("want no host allowed, got %v", err)
		}
	})
}

func TestHTTPCallsAreCachedForTheirRound(t *testing.T) {
	srv, hits := webServer(t, "")
	web, err := celenv.NewHTTP(celenv.HTTPOptions{AllowedHosts: []string{"*.example.com", "127.0.0.1:" + strings.Split(srv.URL, ":")[2]}})
	if err != nil {
		t.Fatal(err)
	}
	expr := `[http.Get("` + srv.URL + `/json").team, http.Get("` + srv.URL + `/json").team]`
	round := web.Round()
	for range 3 { // three triggers, one round
		if _, _, err := evalHTTP(t, expr, round); err != nil {
			t.Fatal(err)
		}
	}
	if n := hits.Load(); n != 1 {
		t.Errorf("one round made %d requests, want 1", n)
	}
	if _, _, err := evalHTTP(t, expr, web.Round()); err != nil {
		t.Fatal(err)
	}
	if n := hits.Load(); n != 2 {
		t.Errorf("a new round made %d requests in all, want 2", n)
	}
}

func TestHTTPClientTrustsItsCABundle(t *testing.T) {
	srv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { _, _ = io.WriteString(w, `{"ok": true}`) }))
	t.Cleanup(srv.Close)
	ca := strings.ReplaceAll(string(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: srv.Certificate().Raw})), "\n", `\n`)
	host, _ := url.Parse(srv.URL)
	web, err := celenv.NewHTTP(celenv.HTTPOptions{AllowedHosts: []string{host.Hostname()}})
	if err != nil {
		t.Fatal(err)
	}
	got, _, err := evalHTTP(t, `http.Client("`+ca+`").Get("`+srv.URL+`").ok`, web.Round())
	if err != nil || got != true {
		t.Fatalf("with the CA bundle: got %v, %v", got, err)
	}
	if _, _, err := evalHTTP(t, `http.Get("`+srv.URL+`")`, web.Round()); err == nil || !strings.Contains(err.Error(), "certificate") {
		t.Fatalf("without it: want a certificate error, got %v", err)
	}
	if _, _, err := evalHTTP(t, `http.Client("not pem").Get("`+srv.URL+`")`, web.Round()); err == nil || !strings.Contains(err.Error(), "the CA bundle is not PEM") {
		t.Fatalf("a bad bundle: got %v", err)
	}
}

func TestHTTPAllowedHostsAreChecked(t *testing.T) {
	for _, bad := range []string{"https://example.com", "example.com/path", "*", "a:b", ""} {
		if _, err := celenv.NewHTTP(celenv.HTTPOptions{AllowedHosts: []string{"ok.example.com", bad}}); err == nil || !strings.Contains(err.Error(), "allowed hosts[1]") {
			t.Errorf("%q: want an error naming allowed hosts[1], got %v", bad, err)
		}
	}
}
