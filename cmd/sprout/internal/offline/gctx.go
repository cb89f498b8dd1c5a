package offline

import (
	"fmt"
	"path/filepath"
	"strings"

	"github.com/sprout-gitops/sprout/celenv"
	"github.com/sprout-gitops/sprout/globalctx"
)

// kyvernoEntry is one of a kyverno-test.yaml's globalContextEntries: the
// data of the GlobalContextEntry called Name, in place of the cluster's.
type kyvernoEntry struct {
	Name string `json:"name"`
	// Data, Resources and ResourceFiles are the entry's data, one of them:
	// any object, or a list of objects written out or in files.
	Data          any              `json:"data"`
	Resources     []map[string]any `json:"resources"`
	ResourceFiles []string         `json:"resourceFiles"`
	// FieldPath is a JMESPath expression that picks the data's root.
	FieldPath   string              `json:"fieldPath"`
	Projections []kyvernoProjection `json:"projections"`
}

// kyvernoProjection names a JMESPath expression over the root.
type kyvernoProjection struct {
	Name string `json:"name"`
	Path string `json:"path"`
}

// mockEntries serves the entries as Kyverno's CLI serves them: the root
// is the data, or the list of resources, through fieldPath; with
// projections, the entry holds an object of each projection's value by its
// name, which globalContext.Get(name, projection) reads; without, the root.
// Nil when there are none.
func mockEntries(dir string, entries []kyvernoEntry) (celenv.GlobalContext, error) {
	if len(entries) == 0 {
		return nil, nil
	}
	s := globalctx.NewStatic()
	for i, e := range entries {
		value, err := mockValue(dir, e)
		if err != nil {
			return nil, fmt.Errorf("globalContextEntries[%d] %q: %w", i, e.Name, err)
		}
		if err := s.AddMock(e.Name, value); err != nil {
			return nil, fmt.Errorf("globalContextEntries[%d]: %w", i, err)
		}
	}
	return s, nil
}

// mockValue is what one entry holds.
func mockValue(dir string, e kyvernoEntry) (any, error) {
	root, err := mockRoot(dir, e)
	if err != nil {
		return nil, err
	}
	if e.FieldPath != "" {
		if root, err = globalctx.Search(e.FieldPath, root); err != nil {
			return nil, fmt.Errorf("fieldPath: %w", err)
		}
	}
	if len(e.Projections) == 0 {
		return root, nil
	}
	out := make(map[string]any, len(e.Projections))
	for j, p := range e.Projections {
		if p.Name == "" || p.Path == "" {
			return nil, fmt.Errorf("projections[%d]: name and path are required", j)
		}
		if out[p.Name], err = globalctx.Search(p.Path, root); err != nil {
			return nil, fmt.Errorf("projections[%d] %q: %w", j, p.Name, err)
		}
	}
	return out, nil
}

// mockRoot is the entry's data before fieldPath: exactly one of data,
// resources and resourceFiles, as Kyverno checks them.
func mockRoot(dir string, e kyvernoEntry) (any, error) {
	given := 0
	for _, set := range []bool{e.Data != nil, e.Resources != nil, e.ResourceFiles != nil} {
		if set {
			given++
		}
	}
	switch {
	case e.Name == "":
		return nil, fmt.Errorf("name is required")
	case given != 1:
		return nil, fmt.Errorf("give one of data, resources and resourceFiles")
	case e.Data != nil:
		if _, ok := e.Data.(map[string]any); !ok {
			return nil, fmt.Errorf("data must be an object")
		}
		return e.Data, nil
	}
	list := make([]any, 0, len(e.Resources))
	for _, r := range e.Resources {
		list = append(list, r)
	}
	for j, f := range e.ResourceFiles {
		clean := filepath.ToSlash(filepath.Clean(f))
		if f == "" || filepath.IsAbs(f) || clean == ".." || strings.HasPrefix(clean, "../") {
			return nil, fmt.Errorf("resourceFiles[%d]: %q is not a path inside the test's folder", j, f)
		}
		objs, err := ReadObjects([]string{filepath.Join(dir, clean)})
		if err != nil {
			return nil, fmt.Errorf("resourceFiles[%d]: %w", j, err)
		}
		for _, o := range objs {
			list = append(list, o.Object)
		}
	}
	return list, nil
}
