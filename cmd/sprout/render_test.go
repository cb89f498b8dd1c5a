package main

import (
	"bytes"
	"context"
	"flag"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

var update = flag.Bool("update", false, "rewrite fixtures/*/expected.yaml from sprout render's output")

// TestRenderGolden renders every fixture scenario with the CLI and compares
// the output, byte for byte, with its expected.yaml. A scenario holds one
// policy.yaml or a policies/ folder, rendered whole as a Git source reads it.
// A scenario with an error.txt must fail with a message containing each of
// its lines.
func TestRenderGolden(t *testing.T) {
	files, err := filepath.Glob("../../fixtures/*/policy.yaml")
	if err != nil {
		t.Fatal(err)
	}
	folders, err := filepath.Glob("../../fixtures/*/policies")
	if err != nil {
		t.Fatal(err)
	}
	if len(files) < 9 || len(folders) < 1 {
		t.Fatalf("found only %d scenarios with a policy.yaml and %d with a policies/ folder", len(files), len(folders))
	}
	for _, policy := range append(files, folders...) {
		dir := filepath.Dir(policy)
		t.Run(filepath.Base(dir), func(t *testing.T) {
			args := []string{"render", "-p", policy, "-r", filepath.Join(dir, "triggers.yaml")}
			if _, err := os.Stat(filepath.Join(dir, "context.yaml")); err == nil {
				args = append(args, "--context-objects", filepath.Join(dir, "context.yaml"))
			}
			var out bytes.Buffer
			root := newRootCommand()
			root.SetArgs(args)
			root.SetOut(&out)
			runErr := root.ExecuteContext(context.Background())

			if want, err := os.ReadFile(filepath.Join(dir, "error.txt")); err == nil {
				if runErr == nil {
					t.Fatalf("render succeeded, want an error:\n%s", out.String())
				}
				for _, line := range strings.Split(strings.TrimSpace(string(want)), "\n") {
					if !strings.Contains(runErr.Error(), line) {
						t.Errorf("error %q does not contain %q", runErr, line)
					}
				}
				return
			}
			if runErr != nil {
				t.Fatal(runErr)
			}
			expected := filepath.Join(dir, "expected.yaml")
			if *update {
				if err := os.WriteFile(expected, out.Bytes(), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			want, err := os.ReadFile(expected)
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(want, out.Bytes()) {
				t.Errorf("sprout render output differs from %s (go test ./cmd/sprout -run Golden -update rewrites it):\n--- want\n%s\n--- got\n%s", expected, want, out.String())
			}
		})
	}
}

func TestRenderJSONAndErrors(t *testing.T) {
	run := func(args ...string) (string, error) {
		var out bytes.Buffer
		root := newRootCommand()
		root.SetArgs(append([]string{"render"}, args...))
		root.SetOut(&out)
		root.SetErr(&bytes.Buffer{})
		err := root.ExecuteContext(context.Background())
		return out.String(), err
	}
	out, err := run("-p", "../../fixtures/zk-kafka-address/policy.yaml", "-r", "../../fixtures/zk-kafka-address", "-o", "json")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out, `"kind": "List"`) || !strings.Contains(out, `"name": "zk-kafka-address"`) {
		t.Errorf("json output:\n%s", out)
	}
	tests := []struct {
		name string
		args []string
		want string
	}{
		{"missing policy flag", []string{"-r", "x.yaml"}, `required flag(s) "policy" not set`},
		{"bad operation", []string{"-p", "../../fixtures/zk-kafka-address/policy.yaml", "-r", "../../fixtures/zk-kafka-address/triggers.yaml", "--operation", "CONNECT"}, `--operation: "CONNECT"`},
		{"missing file", []string{"-p", "nope.yaml", "-r", "../../fixtures/zk-kafka-address/triggers.yaml"}, "nope.yaml"},
		{"not a policy", []string{"-p", "../../fixtures/zk-kafka-address/triggers.yaml", "-r", "../../fixtures/zk-kafka-address/triggers.yaml"}, `apiVersion "v1" is not one of policies.kyverno.io`},
		{"clone source missing", []string{"-p", "../../fixtures/clone-get/policy.yaml", "-r", "../../fixtures/clone-get/triggers.yaml"}, `clone sources not found (give them with --context-objects): secrets default/regcred`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := run(tt.args...)
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("want error containing %q, got %v", tt.want, err)
			}
		})
	}
}

// TestRenderRefusesLinksInAFolder: `sprout render` reads a folder as a
// policy folder source does (issue #25, item 5): a link or a named pipe in
// it ends the command with an error naming its path. Before, a link to
// /dev/zero was read until the process died out of memory, and a named
// pipe blocked it for ever.
func TestRenderRefusesLinksInAFolder(t *testing.T) {
	const policy = "../../fixtures/zk-kafka-address/policy.yaml"
	const triggers = "../../fixtures/zk-kafka-address/triggers.yaml"
	tests := []struct {
		name string
		// make fills dir, read with -p or -r.
		make   func(t *testing.T, dir string)
		policy bool
		want   string
	}{
		{name: "-p: a link to /dev/zero", policy: true, make: func(t *testing.T, dir string) {
			if err := os.Symlink("/dev/zero", filepath.Join(dir, "zero.yaml")); err != nil {
				t.Fatal(err)
			}
		}, want: "zero.yaml: a symbolic link; only regular files are read"},
		{name: "-p: a named pipe", policy: true, make: func(t *testing.T, dir string) {
			if err := syscall.Mkfifo(filepath.Join(dir, "pipe.yml"), 0o644); err != nil {
				t.Fatal(err)
			}
		}, want: "pipe.yml: a named pipe; only regular files are read"},
		{name: "-r: a link out of the folder", make: func(t *testing.T, dir string) {
			if err := os.Symlink("../../../../../../../../etc/passwd", filepath.Join(dir, "passwd.json")); err != nil {
				t.Fatal(err)
			}
		}, want: "passwd.json: a symbolic link"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			data, err := os.ReadFile(policy)
			if err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(filepath.Join(dir, "good.yaml"), data, 0o644); err != nil {
				t.Fatal(err)
			}
			tt.make(t, dir)
			args := []string{"render", "-p", policy, "-r", dir}
			if tt.policy {
				args = []string{"render", "-p", dir, "-r", triggers}
			}
			done := make(chan error, 1)
			go func() {
				root := newRootCommand()
				root.SetArgs(args)
				root.SetOut(&bytes.Buffer{})
				root.SetErr(&bytes.Buffer{})
				done <- root.ExecuteContext(context.Background())
			}()
			select {
			case err = <-done:
			case <-time.After(time.Minute):
				t.Fatal("sprout render is blocked")
			}
			if err == nil || !strings.Contains(err.Error(), dir+": "+tt.want) {
				t.Fatalf("want an error containing %q, got %v", dir+": "+tt.want, err)
			}
		})
	}
}

// TestRenderContextObjectsAndSummary: render reads context objects with
// --context-objects, since --context names a kubeconfig context in every
// other command (`render --context prod` used to fail with "stat prod"); the
// kubeconfig's flag is refused with a message naming the right one. Render
// ends with a line counting policies, triggers, objects and errors.
func TestRenderContextObjectsAndSummary(t *testing.T) {
	const dir = "../../fixtures/clone-get"
	run := func(args ...string) (string, string, error) {
		var out, errOut bytes.Buffer
		root := newRootCommand()
		root.SetArgs(append([]string{"render", "-p", dir + "/policy.yaml", "-r", dir + "/triggers.yaml"}, args...))
		root.SetOut(&out)
		root.SetErr(&errOut)
		err := root.ExecuteContext(context.Background())
		return out.String(), errOut.String(), err
	}
	out, errOut, err := run("--context-objects", dir+"/context.yaml")
	if err != nil || !strings.Contains(out, "kind: Secret") {
		t.Fatalf("--context-objects: %v\n%s", err, out)
	}
	if want := "render: 1 policy, 1 trigger, 1 object, 0 errors\n"; errOut != want {
		t.Errorf("summary %q, want %q", errOut, want)
	}
	_, _, err = run("--context", "prod")
	if err == nil || !strings.Contains(err.Error(), "--context-objects") || strings.Contains(err.Error(), "stat prod") {
		t.Errorf("--context prod: want an error naming --context-objects, got %v", err)
	}
	_, errOut, err = run()
	if err == nil || !strings.Contains(errOut, "render: 1 policy, 1 trigger, 0 objects, 1 error") {
		t.Errorf("a missing clone source: error %v, summary %q", err, errOut)
	}
}
