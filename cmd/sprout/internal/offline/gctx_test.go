package offline

import (
	"context"
	"reflect"
	"strings"
	"testing"
)

// TestMockEntryValue: an entry's data as Kyverno's CLI resolves it: data
// or resources, through fieldPath, then an object of its projections,
// which globalContext.Get(name, projection) reads; a mistake names the
// field.
func TestMockEntryValue(t *testing.T) {
	data := map[string]any{"deployments": []any{map[string]any{"name": "a"}, map[string]any{"name": "b"}}}
	tests := []struct {
		name    string
		entry   kyvernoEntry
		get     string
		want    any
		wantErr string
	}{
		{name: "data", entry: kyvernoEntry{Name: "e", Data: data}, want: data},
		{name: "data, projection", entry: kyvernoEntry{Name: "e", Data: data,
			Projections: []kyvernoProjection{{Name: "names", Path: "deployments[].name"}}}, get: "names", want: []any{"a", "b"}},
		{name: "data, fieldPath and projection", entry: kyvernoEntry{Name: "e", Data: data, FieldPath: "deployments",
			Projections: []kyvernoProjection{{Name: "count", Path: "length(@)"}}}, get: "count", want: float64(2)},
		{name: "resources", entry: kyvernoEntry{Name: "e", Resources: []map[string]any{{"kind": "ConfigMap"}}},
			want: []any{map[string]any{"kind": "ConfigMap"}}},
		{name: "two sources", entry: kyvernoEntry{Name: "e", Data: data, Resources: []map[string]any{}}, wantErr: "give one of data, resources and resourceFiles"},
		{name: "none", entry: kyvernoEntry{Name: "e"}, wantErr: "give one of data, resources and resourceFiles"},
		{name: "data not an object", entry: kyvernoEntry{Name: "e", Data: []any{}}, wantErr: "data must be an object"},
		{name: "file out of the folder", entry: kyvernoEntry{Name: "e", ResourceFiles: []string{"../x.yaml"}}, wantErr: `resourceFiles[0]: "../x.yaml" is not a path inside the test's folder`},
		{name: "projection without path", entry: kyvernoEntry{Name: "e", Data: data, Projections: []kyvernoProjection{{Name: "p"}}}, wantErr: "projections[0]: name and path are required"},
		{name: "bad fieldPath", entry: kyvernoEntry{Name: "e", Data: data, FieldPath: "[["}, wantErr: "fieldPath: "},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			gc, err := mockEntries(t.TempDir(), []kyvernoEntry{tt.entry})
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) || !strings.Contains(err.Error(), `globalContextEntries[0] "e"`) {
					t.Fatalf("want an error containing %q, got %v", tt.wantErr, err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			got, found, err := gc.Get(context.Background(), "e", tt.get)
			if err != nil || !found {
				t.Fatalf("Get: found %v, %v", found, err)
			}
			if !reflect.DeepEqual(got, tt.want) {
				t.Errorf("got %#v, want %#v", got, tt.want)
			}
		})
	}
}
