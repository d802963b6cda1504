package strictyaml

import (
	"fmt"
	"reflect"
	"strconv"
	"strings"

	"github.com/goccy/go-yaml"
	"github.com/goccy/go-yaml/ast"
)

// Node is a YAML value kept undecoded, for a plug-in to decode later with
// its own types: an agent's configuration section in an experiment file
// (decoded by the protocol plug-in), a circulation policy's section
// (decoded by the policy). It keeps its file and YAML path, so that every
// error about it still names the file and the line.
//
// A Node field of a struct given to Decode or Node.Decode is bound to its
// file and path; a field absent from the file is a zero Node (IsZero)
// that still knows where it would have been.
type Node struct {
	f    *File
	path string
	n    ast.Node
}

var nodeType = reflect.TypeOf(Node{})

// UnmarshalYAML keeps the node as it is (goccy/go-yaml's NodeUnmarshaler).
func (n *Node) UnmarshalYAML(node ast.Node) error {
	n.n = node
	return nil
}

// Parse parses data (named name in errors) and returns its document as a
// Node at path "$", to be decoded with Node.Decode.
func Parse(name string, data []byte) (Node, error) {
	var n Node
	f, err := Decode(name, data, &n)
	if err != nil {
		return Node{}, err
	}
	n.f, n.path = f, "$"
	return n, nil
}

// File is the file the node came from; errors recorded there are reported
// by its Err.
func (n Node) File() *File {
	if n.f == nil {
		return &File{Name: "(no file)"}
	}
	return n.f
}

// Path is the node's YAML path, such as "$.agents[2].config".
func (n Node) Path() string {
	if n.path == "" {
		return "$"
	}
	return n.path
}

// IsZero reports whether the node is absent or null.
func (n Node) IsZero() bool {
	if n.n == nil {
		return true
	}
	_, null := n.n.(*ast.NullNode)
	return null
}

// Errorf records a validation error about field (a path relative to the
// node: "hold", "passing.move_timeout", or "" for the node itself) in the
// node's file, at the line of the field's value in the node, wherever a
// merge took it from (defaults.agent or the agent's own config), else of
// its nearest parent.
func (n Node) Errorf(field, format string, a ...any) {
	f := n.File()
	path := n.Join(field)
	if f.unparsed[path] {
		return
	}
	if tk := n.find(field); tk != nil && tk.GetToken() != nil {
		pos := tk.GetToken().Position
		f.errs = append(f.errs, fmt.Errorf("%s:%d:%d: %s: %s", f.Name, pos.Line, pos.Column, strings.TrimPrefix(path, "$."), fmt.Sprintf(format, a...)))
		return
	}
	f.Errorf(path, format, a...)
}

// find follows field's keys (dot-separated) down the node's mappings and
// returns the deepest value found, nil if not even the first key is.
func (n Node) find(field string) ast.Node {
	if n.IsZero() || field == "" || strings.ContainsAny(field, "[]") {
		return nil
	}
	var found ast.Node
	cur := n.n
	for _, key := range strings.Split(field, ".") {
		m, ok := mapping(cur)
		if !ok {
			break
		}
		var next ast.Node
		for _, mv := range m.Values {
			if mv.Key.String() == key {
				next = mv.Value
			}
		}
		if next == nil {
			break
		}
		found, cur = next, next
	}
	return found
}

// Join is the YAML path of field relative to the node.
func (n Node) Join(field string) string {
	switch {
	case field == "":
		return n.Path()
	case strings.HasPrefix(field, "["):
		return n.Path() + field
	}
	return n.Path() + "." + field
}

// Decode decodes the node into v strictly, as Decode does a file: an
// unknown field is an error at its line, an unconvertible duration is
// recorded in the node's file and reads as zero. Node fields of v are
// bound to their paths below the node's. An absent node leaves v as it
// is.
func (n Node) Decode(v any) error {
	f := n.File()
	if !n.IsZero() {
		plain := f.checkDurations(n.n, reflect.TypeOf(v), n.Path())
		if err := yaml.NodeToValue(n.n, v, decodeOptions(plain)...); err != nil {
			return f.wrap(err)
		}
	}
	f.bind(reflect.ValueOf(v), n.Path())
	return nil
}

// Split separates the keys of a mapping node that take selects (e.g. the
// sections named after registered policies) from the rest: rest is the
// node without them, taken maps each selected key to its value. A node
// that is not a mapping is returned whole as rest.
func (n Node) Split(take func(key string) bool) (rest Node, taken map[string]Node) {
	m, ok := mapping(n.n)
	if !ok {
		return n, nil
	}
	var keep []*ast.MappingValueNode
	for _, mv := range m.Values {
		key := mv.Key.String()
		if take(key) {
			if taken == nil {
				taken = map[string]Node{}
			}
			taken[key] = Node{f: n.f, path: n.Join(key), n: mv.Value}
			continue
		}
		keep = append(keep, mv)
	}
	rest = n
	rest.n = ast.Mapping(m.GetToken(), m.IsFlowStyle, keep...)
	return rest, taken
}

// Merge returns base overridden by over, key by key and recursively into
// nested mappings (the resolution order of experiment files: an agent's
// own settings over the defaults). Values keep their lines; the result
// has over's path, or base's when over is absent.
func Merge(base, over Node) Node {
	if over.IsZero() {
		return base
	}
	if base.IsZero() {
		return over
	}
	bm, okb := mapping(base.n)
	om, oko := mapping(over.n)
	if !okb || !oko {
		return over
	}
	out := over
	var values []*ast.MappingValueNode
	overKeys := map[string]*ast.MappingValueNode{}
	for _, mv := range om.Values {
		overKeys[mv.Key.String()] = mv
	}
	for _, mv := range bm.Values {
		key := mv.Key.String()
		o, both := overKeys[key]
		if !both {
			values = append(values, mv)
			continue
		}
		m := Merge(Node{f: base.f, path: base.Join(key), n: mv.Value}, Node{f: over.f, path: over.Join(key), n: o.Value})
		values = append(values, ast.MappingValue(o.GetToken(), o.Key, m.n))
		delete(overKeys, key)
	}
	for _, mv := range om.Values {
		if _, left := overKeys[mv.Key.String()]; left {
			values = append(values, mv)
		}
	}
	out.n = ast.Mapping(om.GetToken(), om.IsFlowStyle && bm.IsFlowStyle, values...)
	return out
}

// MarshalYAML writes the node as it was read.
func (n Node) MarshalYAML() (any, error) {
	if n.n == nil {
		return nil, nil
	}
	return n.n, nil
}

func mapping(n ast.Node) (*ast.MappingNode, bool) {
	switch v := n.(type) {
	case *ast.MappingNode:
		return v, true
	case *ast.MappingValueNode:
		return ast.Mapping(v.GetToken(), false, v), true
	case *ast.TagNode:
		return mapping(v.Value)
	case *ast.AnchorNode:
		return mapping(v.Value)
	}
	return nil, false
}

// bind gives every Node field reachable from v its file and path.
func (f *File) bind(v reflect.Value, path string) {
	for v.Kind() == reflect.Pointer || v.Kind() == reflect.Interface {
		if v.IsNil() {
			return
		}
		v = v.Elem()
	}
	switch {
	case v.Type() == nodeType:
		if v.CanSet() || v.CanAddr() {
			n := v.Addr().Interface().(*Node)
			n.f, n.path = f, path
		}
	case v.Kind() == reflect.Struct:
		t := v.Type()
		for i := 0; i < t.NumField(); i++ {
			sf := t.Field(i)
			if !sf.IsExported() {
				continue
			}
			name, _, _ := strings.Cut(sf.Tag.Get("yaml"), ",")
			if name == "-" {
				continue
			}
			if name == "" {
				name = strings.ToLower(sf.Name)
			}
			f.bind(v.Field(i), path+"."+name)
		}
	case v.Kind() == reflect.Slice:
		for i := 0; i < v.Len(); i++ {
			f.bind(v.Index(i), path+"["+strconv.Itoa(i)+"]")
		}
	}
}
