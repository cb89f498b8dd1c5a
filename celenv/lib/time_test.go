package lib_test

import (
	"testing"
	"time"
)

func TestTimeLibrary(t *testing.T) {
	now := time.Date(2025, 1, 2, 15, 30, 45, 0, time.FixedZone("CET", 3600))
	runLibCases(t, now, []libCase{
		{name: "now is Input.Now, in UTC", expr: `time.now()`, want: "2025-01-02T14:30:45Z"},
		{name: "now is a timestamp", expr: `time.now() - duration("24h") == timestamp("2025-01-01T14:30:45Z")`, want: true},
		{name: "now reads hours in UTC", expr: `time.now().getHours()`, want: int64(14)},
		{name: "every now of an evaluation agrees", expr: `time.now() == time.now()`, want: true},
		{name: "truncate to the hour", expr: `time.truncate(timestamp("2025-01-02T03:45:27Z"), duration("1h"))`,
			want: "2025-01-02T03:00:00Z"},
		{name: "truncate to the day", expr: `time.truncate(time.now(), duration("24h"))`, want: "2025-01-02T00:00:00Z"},
		{name: "toCron", expr: `time.toCron(timestamp("2025-01-02T15:30:00Z"))`, want: "30 15 2 1 4"},
		{name: "toCron reads UTC", expr: `time.toCron(timestamp("2025-01-02T15:30:00+02:00"))`, want: "30 13 2 1 4"},
		{name: "toCron of now", expr: `time.toCron(time.now())`, want: "30 14 2 1 4"},
		{name: "truncate wants a duration", expr: `time.truncate(time.now(), "1h")`,
			wantErr: "found no matching overload for 'time.truncate'"},
		{name: "now takes no argument", expr: `time.now(1)`, wantErr: "found no matching overload for 'now'"},
	})
}

func TestTimeNowDefaultsToWallClock(t *testing.T) {
	before := time.Now().Add(-time.Second)
	got, err := evalLib(t, `time.now()`, time.Time{})
	if err != nil {
		t.Fatal(err)
	}
	at, err := time.Parse(time.RFC3339, got.(string))
	if err != nil {
		t.Fatal(err)
	}
	if at.Before(before) || at.After(time.Now().Add(time.Second)) {
		t.Errorf("time.now() with a zero Input.Now = %s, want about %s", at, before)
	}
}
