package lib_test

import (
	"testing"
	"time"
)

func TestHashLibrary(t *testing.T) {
	runLibCases(t, time.Time{}, []libCase{
		{name: "sha256", expr: `sha256("abc")`, want: "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"},
		{name: "sha1", expr: `sha1("abc")`, want: "a9993e364706816aba3e25717850c26c9cd0d89d"},
		{name: "md5", expr: `md5("abc")`, want: "900150983cd24fb0d6963f7d28e17f72"},
		{name: "md5 of the empty string", expr: `md5("")`, want: "d41d8cd98f00b204e9800998ecf8427e"},
		{name: "md5 of Kyverno's documented example", expr: `md5("nginx:latest")`, want: "403554a5dfea78d1ca4a8ff5830ac2ae"},
		{name: "hash a field", expr: `sha1(object.metadata.name).size()`, want: int64(40)},
		{name: "hash rejects bytes at compile time", expr: `sha256(b"abc")`, wantErr: "found no matching overload for 'sha256'"},
	})
}
