package celenv

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"regexp"
	"strings"

	"github.com/google/cel-go/cel"
	"github.com/google/cel-go/common/types"
	yaml "go.yaml.in/yaml/v3"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/validation/field"

	apiv1 "github.com/sprout-gitops/sprout/api/policies/v1"
	"github.com/sprout-gitops/sprout/celenv/celjson"
	"github.com/sprout-gitops/sprout/internal/yamlbudget"
)

// generateTemplate is a generate entry written as YAML: one object per
// document. With interpolate: cel, its (( expr )) placeholders were compiled
// with the policy, so running it only evaluates them.
type generateTemplate struct {
	documents []document
}

// document is one compiled YAML document: the object it builds.
type document struct {
	at   string // spec.generate[i].template.value: document n, for errors
	root templateNode
}

// templateNode builds one value of a document for one evaluation. Every call
// returns fresh maps and slices: the compiled template is shared.
type templateNode interface {
	value(ctx context.Context, activation map[string]any) (any, error)
}

type (
	// literal is a scalar taken as written: string, int64, float64, bool or nil.
	literal struct{ v any }
	// mapping is a YAML mapping; keys are never interpolated.
	mapping struct {
		keys   []string
		values []templateNode
	}
	// sequence is a YAML sequence.
	sequence []templateNode
	// placeholder is a scalar that is exactly one (( expr )): it becomes the
	// expression's value, whatever its type. expression.name holds its source.
	placeholder struct{ expression }
	// text is a scalar with placeholders inside other text: each is spliced
	// in as text.
	text []segment
)

// segment is a run of literal text, or one placeholder when expr is set.
type segment struct {
	text string
	expr *expression
}

func (g generateTemplate) run(ctx context.Context, activation map[string]any, gen *generation) error {
	for _, d := range g.documents {
		v, err := d.root.value(ctx, activation)
		if err == nil && ctx.Err() != nil {
			// What the document built ran over the evaluation's budget.
			err = interrupted(cause(ctx, activation), field.NewPath(d.at), nil)
		}
		if err != nil {
			return err
		}
		obj := v.(map[string]any) // the root of a document is always a mapping
		if err := checkObject(obj); err != nil {
			return fmt.Errorf("%s: %w", d.at, err)
		}
		// Each object keeps its metadata.namespace; for a namespaced policy,
		// gen.add fills in the policy's namespace and refuses any other.
		if err := gen.add("", obj, d.at); err != nil {
			return err
		}
	}
	return nil
}

// checkObject tells whether a document built one object: not a List, whose
// items gen.add would generate instead, and not missing its identity.
func checkObject(obj map[string]any) error {
	if _, ok := obj["items"].([]any); ok && isListShaped(obj) {
		return errors.New("a List is not allowed: write one object per document")
	}
	u := unstructured.Unstructured{Object: obj}
	if u.GetAPIVersion() == "" || u.GetKind() == "" || u.GetName() == "" {
		return errors.New("an object needs apiVersion, kind and metadata.name")
	}
	return nil
}

func (l literal) value(context.Context, map[string]any) (any, error) { return l.v, nil }

func (m mapping) value(ctx context.Context, activation map[string]any) (any, error) {
	out := make(map[string]any, len(m.keys))
	for i, key := range m.keys {
		v, err := m.values[i].value(ctx, activation)
		if err != nil {
			return nil, err
		}
		out[key] = v
	}
	return out, nil
}

func (s sequence) value(ctx context.Context, activation map[string]any) (any, error) {
	out := make([]any, 0, len(s))
	for _, item := range s {
		v, err := item.value(ctx, activation)
		if err != nil {
			return nil, err
		}
		out = append(out, v)
	}
	return out, nil
}

func (p placeholder) value(ctx context.Context, activation map[string]any) (any, error) {
	out, err := p.eval(ctx, activation)
	if err != nil {
		return nil, err
	}
	v, size, err := celjson.ConvertSized(out, activationBudget(activation).charge)
	if errors.Is(err, errWalkStopped) {
		return nil, interrupted(cause(ctx, activation), p.path, nil)
	}
	if err != nil {
		return nil, fmt.Errorf("%s: %w", p.path, err)
	}
	// The copy is the template's, not the expression's: charge it too, or
	// one variable spliced many times would be copied for free.
	charge(activation, scaled(size, buildCostPerByte))
	return v, nil
}

func (t text) value(ctx context.Context, activation map[string]any) (any, error) {
	var b strings.Builder
	for _, s := range t {
		if s.expr == nil {
			b.WriteString(s.text)
			continue
		}
		out, err := s.expr.eval(ctx, activation)
		if err != nil {
			return nil, err
		}
		switch out.(type) {
		case types.String, types.Int, types.Uint, types.Double, types.Bool:
			// As string(x) would write it: ints without decimals, doubles plainly.
			s := string(out.ConvertToType(types.StringType).(types.String))
			charge(activation, scaled(uint64(len(s)), buildCostPerByte))
			b.WriteString(s)
		default:
			return nil, fmt.Errorf("%s: (( %s )) is a %s: only a string, number or bool can be spliced into text",
				s.expr.path, s.expr.name, out.Type().TypeName())
		}
	}
	return b.String(), nil
}

// compileTemplate parses the template's YAML and, with interpolate: cel,
// compiles every placeholder in env. Documents without placeholders are built
// once here, so a malformed literal object is a compile error.
func compileTemplate(env *cel.Env, b *budget, t *apiv1.Template, path *field.Path, defined []string) (generateTemplate, field.ErrorList) {
	c := templateCompiler{env: env, budget: b, value: path.Child("value"), defined: defined}
	switch t.Interpolate {
	case "", apiv1.InterpolateNone:
	case apiv1.InterpolateCEL:
		c.interpolate = true
	default:
		return generateTemplate{}, field.ErrorList{field.NotSupported(path.Child("interpolate"), t.Interpolate,
			[]apiv1.Interpolation{apiv1.InterpolateNone, apiv1.InterpolateCEL})}
	}

	var g generateTemplate
	aliases := yamlbudget.StringMayHaveAliases(t.Value)
	dec := yaml.NewDecoder(strings.NewReader(t.Value))
	for c.doc = 0; ; c.doc++ {
		var n yaml.Node
		err := dec.Decode(&n)
		if errors.Is(err, io.EOF) {
			break
		}
		if err == nil && aliases {
			// Counted in bytes before anything expands the aliases: the
			// decoder's own guard counts values, and an anchor naming a
			// long string passes it. No object larger can be written.
			err = yamlbudget.CheckNode(&n, MaxValueBytes)
		}
		if err == nil {
			// Decoding checks what walking the nodes does not: duplicate keys,
			// aliases that contain themselves.
			var discard any
			err = n.Decode(&discard)
		}
		if err != nil {
			return g, append(c.errs, field.Invalid(c.path(""), field.OmitValueType{}, err.Error()))
		}
		if d, ok := c.document(&n); ok {
			g.documents = append(g.documents, d)
		}
	}
	if len(g.documents) == 0 && len(c.errs) == 0 {
		c.errs = append(c.errs, field.Required(c.value, "a template needs at least one object"))
	}
	return g, c.errs
}

// templateCompiler walks the YAML nodes of one template.
type templateCompiler struct {
	env          *cel.Env
	budget       *budget // the policy's, shared with its other expressions
	interpolate  bool
	value        *field.Path // spec.generate[i].template.value
	defined      []string    // the variables placeholders may read
	doc          int         // index of the document being compiled
	placeholders int         // placeholders compiled so far
	errs         field.ErrorList
}

// path names a place inside the current document. A field.Path cannot point
// inside a YAML string, so the document and the path in it extend its root.
func (c *templateCompiler) path(inner string) *field.Path {
	at := fmt.Sprintf("%s: document %d", c.value, c.doc)
	if inner != "" {
		at += ", " + inner
	}
	return field.NewPath(at)
}

// document compiles one document; ok is false for an empty document or one
// with errors.
func (c *templateCompiler) document(n *yaml.Node) (d document, ok bool) {
	if len(n.Content) == 0 {
		return d, false
	}
	root := resolveAlias(n.Content[0])
	switch {
	case root.Kind == yaml.ScalarNode && root.ShortTag() == "!!null":
		return d, false
	case root.Kind == yaml.SequenceNode:
		c.errs = append(c.errs, field.Invalid(c.path(""), field.OmitValueType{}, "a document must be one object, not a list"))
		return d, false
	case root.Kind != yaml.MappingNode:
		c.errs = append(c.errs, field.Invalid(c.path(""), field.OmitValueType{}, "a document must be an object"))
		return d, false
	}
	errs, placeholdersBefore := len(c.errs), c.placeholders
	d = document{at: c.path("").String(), root: c.node(root, "")}
	if len(c.errs) > errs {
		return d, false
	}
	if c.placeholders == placeholdersBefore {
		// Without placeholders the object is the same for every trigger.
		v, _ := d.root.value(context.Background(), nil)
		if err := checkObject(v.(map[string]any)); err != nil {
			c.errs = append(c.errs, field.Invalid(c.path(""), field.OmitValueType{}, err.Error()))
			return d, false
		}
	}
	return d, true
}

func (c *templateCompiler) node(n *yaml.Node, at string) templateNode {
	n = resolveAlias(n)
	switch n.Kind {
	case yaml.MappingNode:
		return c.mapping(n, at)
	case yaml.SequenceNode:
		items := make(sequence, 0, len(n.Content))
		for i, item := range n.Content {
			items = append(items, c.node(item, fmt.Sprintf("%s[%d]", at, i)))
		}
		return items
	default:
		return c.scalar(n, at)
	}
}

func (c *templateCompiler) mapping(n *yaml.Node, at string) templateNode {
	m := mapping{}
	seen := map[string]bool{}
	for i := 0; i+1 < len(n.Content); i += 2 {
		k := resolveAlias(n.Content[i])
		keyAt := childPath(at, k.Value)
		switch {
		case k.ShortTag() == "!!merge":
			c.errs = append(c.errs, field.Invalid(c.path(keyAt), k.Value, "merge keys are not supported"))
			continue
		case k.Kind != yaml.ScalarNode:
			c.errs = append(c.errs, field.Invalid(c.path(keyAt), field.OmitValueType{}, "a mapping key must be a scalar"))
			continue
		}
		key := k.Value
		if c.interpolate && k.ShortTag() == "!!str" {
			segments, err := splitPlaceholders(k.Value)
			for _, seg := range segments {
				if seg.isExpr {
					err = errors.New("a mapping key cannot hold a placeholder")
				}
			}
			if err != nil {
				c.errs = append(c.errs, field.Invalid(c.path(keyAt), k.Value, err.Error()))
				continue
			}
			key = ""
			if len(segments) == 1 { // text only, with its escapes resolved
				key = segments[0].text
			}
			keyAt = childPath(at, key)
		}
		if seen[key] {
			c.errs = append(c.errs, field.Duplicate(c.path(keyAt), key))
			continue
		}
		seen[key] = true
		m.keys = append(m.keys, key)
		m.values = append(m.values, c.node(n.Content[i+1], keyAt))
	}
	return m
}

func (c *templateCompiler) scalar(n *yaml.Node, at string) templateNode {
	switch tag := n.ShortTag(); tag {
	case "!!str":
		if c.interpolate {
			return c.interpolated(n.Value, at)
		}
		return literal{n.Value}
	case "!!timestamp", "!!binary":
		// JSON has neither: keep the text as written.
		return literal{n.Value}
	case "!!null":
		return literal{nil}
	case "!!bool", "!!int", "!!float":
		var v any
		if err := n.Decode(&v); err != nil {
			c.errs = append(c.errs, field.Invalid(c.path(at), n.Value, err.Error()))
			return literal{}
		}
		switch x := v.(type) {
		case int:
			v = int64(x)
		case uint64:
			if x > math.MaxInt64 {
				c.errs = append(c.errs, field.Invalid(c.path(at), n.Value, "integer out of range"))
			}
			v = int64(x)
		case float64:
			if math.IsInf(x, 0) || math.IsNaN(x) {
				c.errs = append(c.errs, field.Invalid(c.path(at), n.Value, "JSON has no infinity or NaN"))
			}
		}
		return literal{v}
	default:
		c.errs = append(c.errs, field.Invalid(c.path(at), n.Value, fmt.Sprintf("tag %s is not supported", tag)))
		return literal{}
	}
}

// interpolated compiles a string scalar with interpolate: cel.
func (c *templateCompiler) interpolated(s, at string) templateNode {
	segments, err := splitPlaceholders(s)
	if err != nil {
		c.errs = append(c.errs, field.Invalid(c.path(at), s, err.Error()))
		return literal{}
	}
	var out text
	for _, seg := range segments {
		if !seg.isExpr {
			out = append(out, segment{text: seg.text})
			continue
		}
		c.placeholders++
		e, errs := c.budget.compile(c.env, seg.text, seg.text, c.path(at), nil, c.defined)
		for _, err := range errs {
			if err.BadValue == (field.OmitValueType{}) {
				err.BadValue = seg.text
			}
		}
		c.errs = append(c.errs, errs...)
		out = append(out, segment{expr: &e})
	}
	switch {
	case len(out) == 0:
		return literal{""}
	case len(out) == 1 && out[0].expr != nil:
		return placeholder{*out[0].expr}
	case len(out) == 1:
		return literal{out[0].text}
	}
	return out
}

// plainKey is a key that reads unambiguously after a dot in a path.
var plainKey = regexp.MustCompile(`^[a-zA-Z0-9_-]+$`)

// childPath is the path of key in the mapping at parent: data.name, or
// metadata.labels[app.kubernetes.io/name] when the key has other characters.
func childPath(parent, key string) string {
	switch {
	case !plainKey.MatchString(key):
		return parent + "[" + key + "]"
	case parent == "":
		return key
	}
	return parent + "." + key
}

func resolveAlias(n *yaml.Node) *yaml.Node {
	for n.Kind == yaml.AliasNode && n.Alias != nil {
		n = n.Alias
	}
	return n
}
