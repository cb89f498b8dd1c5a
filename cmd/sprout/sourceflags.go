package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/spf13/pflag"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/sprout-gitops/sprout/sources"
)

// sourceFlags declare where policies come from: the cluster, a Git
// repository, Flux sources, folders. `sprout run` runs them; `sprout diff` plans them.
type sourceFlags struct {
	clusterPolicies bool
	policyDirs      []string
	pollInterval    time.Duration
	git             sources.GitOptions
	gitFiles        sources.AuthFiles
	gitSecretRef    string
	fluxRefs        []string
	fluxPath        string
	policySelector  string
	// watchSelector is --watch-label-selector, Flux's name for it.
	watchSelector string
}

// register adds the source flags to f; verb ("run", "diff") words their help.
func (ro *sourceFlags) register(f *pflag.FlagSet, verb string) {
	f.BoolVar(&ro.clusterPolicies, "cluster-policies", ro.clusterPolicies, verb+" the policies stored in the cluster")
	f.StringSliceVar(&ro.policyDirs, "policy-dir", nil, "a folder of policy files (*.yaml, *.yml, any depth) to "+verb+"; repeat for several")
	f.DurationVar(&ro.pollInterval, "poll-interval", time.Minute, "how often policy folders are read again, the Git remote checked, and Flux sources checked when they have not changed")
	f.StringVar(&ro.git.URL, "git-url", "", "a Git repository of policies (https://, ssh://, git@host:path or file://)")
	f.StringVar(&ro.git.Branch, "git-branch", "", "the branch to follow (default: the remote's default branch)")
	f.StringVar(&ro.git.Tag, "git-tag", "", "a tag to follow instead of a branch")
	f.StringVar(&ro.git.SemVer, "git-semver", "", `follow the highest tag in this semver range (">=1.0.0 <2.0.0", "1.x") instead of a branch`)
	f.StringVar(&ro.git.Commit, "git-commit", "", "run this commit (a full SHA-1) only, alone or on --git-branch")
	f.StringVar(&ro.git.Path, "git-path", "", "the folder of the repository holding the policies (default: all of it)")
	f.DurationVar(&ro.git.Timeout, "git-timeout", time.Minute, "how long one check or fetch of the remote may take")
	f.StringVar(&ro.gitFiles.Username, "git-username", "git", "the user name for HTTPS basic auth (with --git-password-file)")
	f.StringVar(&ro.gitFiles.PasswordFile, "git-password-file", "", "a file holding the HTTPS basic-auth password or token, read at every check")
	f.StringVar(&ro.gitFiles.TokenFile, "git-token-file", "", "a file holding an HTTPS bearer token, read at every check")
	f.StringVar(&ro.gitFiles.SSHKeyFile, "git-ssh-key-file", "", "a file holding the SSH private key (PEM or OpenSSH), read at every check")
	f.StringVar(&ro.gitFiles.SSHKeyPasswordFile, "git-ssh-key-password-file", "", "a file holding the passphrase of an encrypted --git-ssh-key-file")
	f.StringVar(&ro.gitFiles.KnownHostsFile, "git-known-hosts-file", "", "a known_hosts file with the SSH host keys to accept (required for SSH URLs)")
	f.StringVar(&ro.gitSecretRef, "git-secret-ref", "", "<namespace>/<name> of a Secret with the Git credentials (Flux's keys), read at every check")
	f.StringArrayVar(&ro.fluxRefs, "source-ref", nil, "<kind>/<namespace>/<name> of a Flux GitRepository, OCIRepository or Bucket whose artifact holds policies to "+verb+"; repeat for several")
	f.StringVar(&ro.policySelector, "policy-selector", "", "a label selector (team=a,tier!=legacy): "+verb+" only the policies, of every source, whose labels it matches")
	f.StringVar(&ro.watchSelector, "watch-label-selector", "", "Flux's name for --policy-selector, for shards: sharding.fluxcd.io/key=shard1 (docs/sharding.md)")
	f.StringVar(&ro.fluxPath, "source-path", "", "the folder of each --source-ref's artifact holding the policies (default: all of it)")
}

// sources builds the sources the flags declare, in precedence order: the
// cluster, the Git repository, the Flux sources, the folders.
func (ro *sourceFlags) sources(ctx context.Context, cfg *rest.Config) ([]sources.Source, error) {
	flag, selector, err := ro.selector()
	if err != nil {
		return nil, err
	}
	out, err := ro.allSources(ctx, cfg)
	if err != nil || selector == "" {
		return out, err
	}
	sel, err := labels.Parse(selector)
	if err != nil {
		return nil, fmt.Errorf("%s %q: %w", flag, selector, err)
	}
	for _, src := range out {
		s, ok := src.(sources.Selective)
		if !ok {
			return nil, fmt.Errorf("%s: source %s cannot select policies", flag, src.Name())
		}
		s.SelectPolicies(sel)
	}
	return out, nil
}

// selector returns the policy selector and the flag that gave it: either
// name, not both with different values.
func (ro *sourceFlags) selector() (flag, selector string, err error) {
	switch {
	case ro.watchSelector == "":
		return "--policy-selector", ro.policySelector, nil
	case ro.policySelector != "" && ro.policySelector != ro.watchSelector:
		return "", "", fmt.Errorf("--policy-selector %q and --watch-label-selector %q: one selector, under either name", ro.policySelector, ro.watchSelector)
	}
	return "--watch-label-selector", ro.watchSelector, nil
}

// allSources builds the sources, every policy of each.
func (ro *sourceFlags) allSources(ctx context.Context, cfg *rest.Config) ([]sources.Source, error) {
	var out []sources.Source
	if ro.clusterPolicies {
		client, err := dynamic.NewForConfig(cfg)
		if err != nil {
			return nil, err
		}
		out = append(out, sources.NewCluster(client))
	}
	gitSrc, err := ro.gitSource(ctx, cfg)
	if err != nil {
		return nil, err
	}
	if gitSrc != nil {
		out = append(out, gitSrc)
	}
	fluxSrcs, err := ro.fluxSources(cfg)
	if err != nil {
		return nil, err
	}
	out = append(out, fluxSrcs...)
	for _, dir := range ro.policyDirs {
		if info, err := os.Stat(dir); err != nil || !info.IsDir() {
			return nil, fmt.Errorf("--policy-dir %s: not a folder", dir)
		}
		out = append(out, sources.NewDirectory(dir, ro.pollInterval))
	}
	return out, nil
}

// fluxSources builds a source per --source-ref, in the order given.
func (ro *sourceFlags) fluxSources(cfg *rest.Config) ([]sources.Source, error) {
	if len(ro.fluxRefs) == 0 {
		if ro.fluxPath != "" {
			return nil, errors.New("--source-path needs a --source-ref")
		}
		return nil, nil
	}
	client, err := dynamic.NewForConfig(cfg)
	if err != nil {
		return nil, err
	}
	var out []sources.Source
	seen := map[sources.FluxRef]bool{}
	for _, s := range ro.fluxRefs {
		ref, err := sources.ParseFluxRef(s)
		if err != nil {
			return nil, fmt.Errorf("--source-ref %w", err)
		}
		if seen[ref] {
			return nil, fmt.Errorf("--source-ref %s: given twice", ref)
		}
		seen[ref] = true
		src, err := sources.NewFlux(sources.FluxOptions{Ref: ref, Path: ro.fluxPath, Client: client, Interval: ro.pollInterval})
		if err != nil {
			return nil, err
		}
		out = append(out, src)
	}
	return out, nil
}

// gitSource builds the Git source the flags describe, if any.
func (ro *sourceFlags) gitSource(ctx context.Context, cfg *rest.Config) (sources.Source, error) {
	if ro.git.URL == "" {
		return nil, nil
	}
	ro.git.Interval = ro.pollInterval
	auth, err := ro.gitAuth(ctx, cfg)
	if err != nil {
		return nil, err
	}
	ro.git.Auth = auth
	return sources.NewGit(ro.git)
}

// gitAuth builds the credentials the flags describe: a Secret, or files.
// Either is read again at every check, so rotated credentials apply without
// a restart.
func (ro *sourceFlags) gitAuth(ctx context.Context, cfg *rest.Config) (sources.AuthFunc, error) {
	files := ro.gitFiles
	sshFlags := givenFlags(map[string]string{
		"--git-ssh-key-file":          files.SSHKeyFile,
		"--git-ssh-key-password-file": files.SSHKeyPasswordFile,
		"--git-known-hosts-file":      files.KnownHostsFile,
	})
	httpsFlags := givenFlags(map[string]string{
		"--git-password-file": files.PasswordFile,
		"--git-token-file":    files.TokenFile,
	})
	if ro.gitSecretRef != "" {
		if given := slices.Concat(sshFlags, httpsFlags); len(given) > 0 {
			return nil, fmt.Errorf("--git-secret-ref and %s: take credentials from a Secret or from files, not both", given[0])
		}
		namespace, name, ok := strings.Cut(ro.gitSecretRef, "/")
		if !ok || namespace == "" || name == "" || strings.Contains(name, "/") {
			return nil, fmt.Errorf("--git-secret-ref %q: want <namespace>/<name>", ro.gitSecretRef)
		}
		client, err := kubernetes.NewForConfig(cfg)
		if err != nil {
			return nil, err
		}
		return sources.SecretAuth(client, namespace, name, ro.git.URL), nil
	}
	if sources.IsSSHURL(ro.git.URL) {
		switch {
		case len(httpsFlags) > 0:
			return nil, fmt.Errorf("%s is for HTTPS URLs; an SSH URL takes --git-ssh-key-file", httpsFlags[0])
		case files.KnownHostsFile == "":
			return nil, errors.New("an SSH URL needs --git-known-hosts-file (or --git-secret-ref): Sprout never connects to a host it cannot verify")
		case files.SSHKeyFile == "":
			return nil, errors.New("an SSH URL needs --git-ssh-key-file (or --git-secret-ref)")
		}
	} else {
		switch {
		case len(sshFlags) > 0:
			return nil, fmt.Errorf("%s is for SSH URLs (ssh:// or git@host:path)", sshFlags[0])
		case len(httpsFlags) > 1:
			return nil, errors.New("--git-password-file and --git-token-file: give one")
		case len(httpsFlags) == 0:
			return nil, nil
		}
	}
	auth := sources.FileAuth(ro.git.URL, files)
	// Read the files once now: a wrong path stops start-up rather than every check.
	if _, err := auth(ctx); err != nil {
		return nil, fmt.Errorf("git credentials: %w", err)
	}
	return auth, nil
}

// givenFlags returns the names of the flags with a value, sorted.
func givenFlags(values map[string]string) []string {
	var given []string
	for name, value := range values {
		if value != "" {
			given = append(given, name)
		}
	}
	slices.Sort(given)
	return given
}
