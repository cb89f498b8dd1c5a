package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"testing"

	"k8s.io/klog/v2"
)

// client-go logs at Error a response it could not read because Sprout
// cancelled the request (stopping, or stopping a deleted policy's sync):
// through clientLogger that is Info; every other error stays an error.
func TestCancelledRequestsAreNoErrors(t *testing.T) {
	var buf bytes.Buffer
	log := slog.New(slog.NewTextHandler(&buf, &slog.HandlerOptions{Level: slog.LevelInfo}))
	klog.SetSlogLogger(clientLogger(log))
	defer klog.ClearLogger()
	klog.Background().Error(context.Canceled, "Unexpected error when reading response body")
	klog.Background().Error(fmt.Errorf("read: %w", context.Canceled), "Unexpected error when reading response body", "verb", "GET")
	klog.Background().Error(errors.New("connection reset by peer"), "Unexpected error when reading response body")
	lines := strings.Split(strings.TrimSpace(buf.String()), "\n")
	if len(lines) != 3 {
		t.Fatalf("%d lines, want 3:\n%s", len(lines), buf.String())
	}
	for i, want := range []string{"level=INFO", "level=INFO", "level=ERROR"} {
		if !strings.Contains(lines[i], want) {
			t.Errorf("line %d: %s, want %s", i+1, lines[i], want)
		}
	}
	if !strings.Contains(lines[1], "verb=GET") {
		t.Errorf("line 2 lost its attributes: %s", lines[1])
	}
}
