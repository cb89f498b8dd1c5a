package inventory

import (
	"bytes"
	"fmt"
	"log/slog"
	"strings"
	"testing"
)

// TestChangeSetLogValue: a sync's log line counts the writes and names a
// few, however many objects there were.
func TestChangeSetLogValue(t *testing.T) {
	var cs ChangeSet
	for i := range 1000 {
		cs.Changes = append(cs.Changes, Change{ID: fmt.Sprintf("ConfigMap/ns-%d/zk", i), Action: Created})
	}
	cs.Changes = append(cs.Changes, Change{ID: "ConfigMap/a/old", Action: Deleted}, Change{ID: "ConfigMap/b/same", Action: Unchanged})
	var buf bytes.Buffer
	slog.New(slog.NewTextHandler(&buf, nil)).Info("applied", "changes", cs)
	line := buf.String()
	for _, want := range []string{"changes.created=1000", "changes.deleted=1", "ConfigMap/ns-0/zk:created", "..."} {
		if !strings.Contains(line, want) {
			t.Errorf("log line lacks %q: %s", want, line)
		}
	}
	if strings.Contains(line, "ns-10/") || strings.Contains(line, "same") || len(line) > 1000 {
		t.Errorf("log line names more than %d objects: %s", loggedObjects, line)
	}
	if !cs.Written() || (ChangeSet{Changes: cs.Changes[len(cs.Changes)-1:]}).Written() {
		t.Error("Written is wrong")
	}
	created := ChangeSet{Changes: cs.Changes[:2]}
	if created.Changed() || !cs.Changed() || !(ChangeSet{Changes: []Change{{Action: Configured}}}).Changed() {
		t.Error("Changed is wrong: only a configured or deleted object is a change to what existed")
	}
}
