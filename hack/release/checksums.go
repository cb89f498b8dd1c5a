package main

import (
	"crypto/sha256"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
)

// checksumsFile is what `sha256sum -c` checks, in the folder of the files.
const checksumsFile = "SHA256SUMS"

// writeChecksums writes SHA256SUMS in dist over the named files, in
// sha256sum's format (the digest, two spaces, the name), sorted by name.
func writeChecksums(dist string, names []string) error {
	var b strings.Builder
	for _, name := range slices.Sorted(slices.Values(names)) {
		sum, err := fileSHA256(filepath.Join(dist, name))
		if err != nil {
			return fmt.Errorf("%s: %w", checksumsFile, err)
		}
		fmt.Fprintf(&b, "%s  %s\n", sum, name)
	}
	return os.WriteFile(filepath.Join(dist, checksumsFile), []byte(b.String()), 0o644) //nolint:gosec // published beside the files
}

// fileSHA256 is the hex SHA-256 of the file at path.
func fileSHA256(path string) (string, error) {
	f, err := os.Open(path)
	if err != nil {
		return "", err
	}
	defer func() { _ = f.Close() }()
	h := sha256.New()
	if _, err := io.Copy(h, f); err != nil {
		return "", err
	}
	return fmt.Sprintf("%x", h.Sum(nil)), nil
}
