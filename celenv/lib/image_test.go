package lib_test

import (
	"testing"
	"time"
)

const libDigest = "sha256:6aefddb645ee6963afd681b1845c661d0ea4c3b20ab9db86d9e753b203d385f2"

func TestImageLibrary(t *testing.T) {
	// parts lists what each accessor returns, to compare a reference in one case.
	const parts = `[i.registry(), i.repository(), i.tag(), i.digest(), i.identifier(), i.identifierWithSeparator(), string(i.containsDigest())]`
	of := func(ref string) string { return `cel.bind(i, parseImageReference("` + ref + `"), ` + parts + `)` }
	runLibCases(t, time.Time{}, []libCase{
		{name: "Docker Hub official image", expr: of("nginx"),
			want: []any{"index.docker.io", "library/nginx", "latest", "", "latest", ":latest", "false"}},
		{name: "Docker Hub with tag", expr: of("nginx:1.2"),
			want: []any{"index.docker.io", "library/nginx", "1.2", "", "1.2", ":1.2", "false"}},
		{name: "docker.io is index.docker.io", expr: of("docker.io/bitnami/redis:7"),
			want: []any{"index.docker.io", "bitnami/redis", "7", "", "7", ":7", "false"}},
		{name: "registry with a dot", expr: of("registry.k8s.io/kube-apiserver-arm64:testtag"),
			want: []any{"registry.k8s.io", "kube-apiserver-arm64", "testtag", "", "testtag", ":testtag", "false"}},
		{name: "registry with a port", expr: of("localhost:5000/team/app"),
			want: []any{"localhost:5000", "team/app", "latest", "", "latest", ":latest", "false"}},
		{name: "localhost without a port is a Docker Hub path", expr: of("localhost/app:v1"),
			want: []any{"index.docker.io", "localhost/app", "v1", "", "v1", ":v1", "false"}},
		{name: "digest", expr: of("ghcr.io/org/app@" + libDigest),
			want: []any{"ghcr.io", "org/app", "", libDigest, libDigest, "@" + libDigest, "true"}},
		{name: "tag and digest: the tag is dropped, as in Kyverno", expr: of("ghcr.io/org/app:1.0@" + libDigest),
			want: []any{"ghcr.io", "org/app", "", libDigest, libDigest, ":1.0@" + libDigest, "true"}},
		{name: "image() is parseImageReference", expr: `image("nginx:latest") == parseImageReference("nginx:latest")`, want: true},
		{name: "different references differ", expr: `image("nginx:1") == image("nginx:2")`, want: false},
		{name: "all from one registry", expr: `["ghcr.io/org/web:1", "ghcr.io/org/db@` + libDigest + `"].map(c, image(c)).all(i, i.registry() == "ghcr.io")`,
			want: true},
		{name: "isImage", expr: `isImage("registry.k8s.io/pause:3.9")`, want: true},
		{name: "isImage: uppercase repository", expr: `isImage("Nginx")`, want: false},
		{name: "isImage: one-letter repository, as go-containerregistry", expr: `isImage("a")`, want: false},
		{name: "isImage: empty tag", expr: `isImage("nginx:")`, want: false},
		{name: "isImage: invalid tag", expr: `isImage("nginx:@")`, want: false},
		{name: "isImage: short digest", expr: `isImage("nginx@sha256:abc")`, want: false},
		{name: "isImage: two digests", expr: `isImage("nginx@` + libDigest + `@` + libDigest + `")`, want: false},
		{name: "isImage: bad registry", expr: `isImage("my registry.io/app")`, want: false},
		{name: "parse error", expr: `parseImageReference("registry.k8s.io/kube-apiserver-arm64:@")`,
			wantErr: `could not parse reference "registry.k8s.io/kube-apiserver-arm64:@"`},
		{name: "isImage rejects an int at compile time", expr: `isImage(0)`, wantErr: "found no matching overload for 'isImage'"},
		{name: "an image cannot be written into an object", expr: `image("nginx")`, wantErr: "cannot be written into an object"},
	})
}
