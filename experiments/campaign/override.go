package campaign

import (
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"

	"github.com/goccy/go-yaml"
)

// Override sets fields of the YAML document data and returns the
// document after them. Each key of overrides is a path: mapping keys
// separated by dots, a list element by its index in brackets
// ("links[0].profile", "defaults.agent.randomwalk.hold", "seed"); its
// value replaces the field's, or is added as the last key of the mapping
// when the field is absent. Every step before the last must exist. The
// result's validity is the experiment format's business (Apply parses
// it).
//
// The document is rewritten from its decoded form: comments are dropped
// and key order is kept.
func Override(data []byte, overrides map[string]any) ([]byte, error) {
	if len(overrides) == 0 {
		return data, nil
	}
	var doc any
	if err := yaml.UnmarshalWithOptions(data, &doc, yaml.UseOrderedMap()); err != nil {
		return nil, err
	}
	for _, path := range slices.Sorted(maps.Keys(overrides)) {
		steps, err := parsePath(path)
		if err != nil {
			return nil, fmt.Errorf("override %q: %v", path, err)
		}
		if doc, err = set(doc, steps, overrides[path], ""); err != nil {
			return nil, fmt.Errorf("override %q: %v", path, err)
		}
	}
	return yaml.MarshalWithOptions(doc, yaml.IndentSequence(true))
}

// step is a mapping key, or a list index when key is "".
type step struct {
	key   string
	index int
}

func (s step) String() string {
	if s.key == "" {
		return fmt.Sprintf("[%d]", s.index)
	}
	return s.key
}

func parsePath(path string) ([]step, error) {
	var out []step
	for _, part := range strings.Split(path, ".") {
		key, rest, _ := strings.Cut(part, "[")
		if key == "" && (len(out) == 0 || rest == "") {
			return nil, fmt.Errorf("empty key")
		}
		if key != "" {
			out = append(out, step{key: key})
		}
		for rest != "" {
			n, after, ok := strings.Cut(rest, "]")
			i, err := strconv.Atoi(n)
			if !ok || err != nil || i < 0 {
				return nil, fmt.Errorf("want [INDEX] after %q", key)
			}
			out = append(out, step{index: i})
			rest = strings.TrimPrefix(after, "[")
			if after != "" && !strings.HasPrefix(after, "[") {
				return nil, fmt.Errorf("unexpected %q after ]", after)
			}
		}
	}
	return out, nil
}

// set returns node with the field at steps set to v; at is the path so
// far, for errors.
func set(node any, steps []step, v any, at string) (any, error) {
	if len(steps) == 0 {
		return v, nil
	}
	s := steps[0]
	here := at + "." + s.String()
	if s.key == "" {
		here = at + s.String()
	}
	here = strings.TrimPrefix(here, ".")
	switch n := node.(type) {
	case yaml.MapSlice:
		if s.key == "" {
			return nil, fmt.Errorf("%s: a mapping, not a list", strings.TrimPrefix(at, "."))
		}
		for i := range n {
			if k, ok := n[i].Key.(string); ok && k == s.key {
				nv, err := set(n[i].Value, steps[1:], v, here)
				if err != nil {
					return nil, err
				}
				n[i].Value = nv
				return n, nil
			}
		}
		if len(steps) > 1 {
			return nil, fmt.Errorf("%s: no such field (only the last step may be added)", here)
		}
		return append(n, yaml.MapItem{Key: s.key, Value: v}), nil
	case []any:
		if s.key != "" {
			return nil, fmt.Errorf("%s: a list: select an element with [INDEX]", strings.TrimPrefix(at, "."))
		}
		if s.index >= len(n) {
			return nil, fmt.Errorf("%s: the list has %d elements", here, len(n))
		}
		nv, err := set(n[s.index], steps[1:], v, here)
		if err != nil {
			return nil, err
		}
		n[s.index] = nv
		return n, nil
	case nil:
		if at == "" {
			return nil, fmt.Errorf("empty document")
		}
	}
	return nil, fmt.Errorf("%s: %s is a value, not a mapping or a list", here, strings.TrimPrefix(at, "."))
}
