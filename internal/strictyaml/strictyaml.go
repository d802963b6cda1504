// Package strictyaml decodes YAML configuration files strictly (unknown
// fields are errors) and reports every problem as FILE:LINE:COL: message,
// whether the YAML decoder or the caller's validation found it.
package strictyaml

import (
	"errors"
	"fmt"
	"io"
	"os"
	"reflect"
	"strings"
	"sync"
	"time"

	"github.com/goccy/go-yaml"
	"github.com/goccy/go-yaml/ast"
	"github.com/goccy/go-yaml/parser"
)

// MaxFileSize caps what Load reads. Configuration and experiment files
// are a few kilobytes; the YAML parser needs about 40 times a file's size
// in memory, so an unbounded file could exhaust the machine before any
// error is reported.
const MaxFileSize = 1 << 20

// File is a decoded YAML file kept for locating fields in errors.
type File struct {
	Name string
	ast  *ast.File
	errs []error
	// unparsed holds the fields whose value could not be converted: they
	// read as zero, and validation must not report that zero as a second
	// mistake (a "10 parsecs" duration is not also "must be positive").
	unparsed map[string]bool
}

// ReadFile reads path, refusing files larger than MaxFileSize with an
// error that says so.
func ReadFile(path string) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, MaxFileSize+1))
	if err != nil {
		return nil, err
	}
	if len(b) > MaxFileSize {
		return nil, fmt.Errorf("%s: larger than %d KiB: not a configuration file (the limit keeps a wrong file from exhausting memory)", path, MaxFileSize>>10)
	}
	return b, nil
}

// Load reads path (at most MaxFileSize bytes) and decodes it into v,
// strictly.
func Load(path string, v any) (*File, error) {
	b, err := ReadFile(path)
	if err != nil {
		return nil, err
	}
	return Decode(path, b, v)
}

// Decode decodes data (named name in errors) into v, strictly. Values the
// decoder accepts but cannot convert (a duration such as "10 parsecs") are
// recorded as validation errors at their line, all of them, and read as
// zero: Err reports them with whatever the caller's validation adds.
func Decode(name string, data []byte, v any) (*File, error) {
	f := &File{Name: name}
	a, err := parser.ParseBytes(data, 0)
	if err != nil {
		return nil, f.wrap(err)
	}
	f.ast = a
	plain := true
	for _, d := range a.Docs {
		plain = f.checkDurations(d.Body, reflect.TypeOf(v), "$") && plain
	}
	if err := yaml.UnmarshalWithOptions(data, v, decodeOptions(plain)...); err != nil {
		return nil, f.wrap(err)
	}
	f.bind(reflect.ValueOf(v), "$")
	return f, nil
}

// decodeOptions are the decoder's options for a document whose durations
// checkDurations found plain (or not): strict, and lenient with durations
// unless they are all plain. The decoder converts a plain duration as
// lenientDuration does (time.ParseDuration of its string), but gives a
// custom unmarshaler the value's text by formatting the node from the
// whole file's tokens: each duration of one agent's section in an
// experiment of n agents cost O(n), and decoding every agent's O(n²)
// (BenchmarkSetup in harness/sim: 3.4 GB of 11.9 GB allocated for 1,000
// agents).
func decodeOptions(plain bool) []yaml.DecodeOption {
	if plain {
		return []yaml.DecodeOption{yaml.Strict()}
	}
	return []yaml.DecodeOption{yaml.Strict(), yaml.CustomUnmarshaler(lenientDuration)}
}

// lenientDuration decodes a duration, leaving zero what checkDurations
// has already reported.
func lenientDuration(d *time.Duration, b []byte) error {
	var s string
	if yaml.Unmarshal(b, &s) == nil {
		if v, err := time.ParseDuration(strings.TrimSpace(s)); err == nil {
			*d = v
		}
	}
	return nil
}

var durationType = reflect.TypeOf(time.Duration(0))

// checkDurations walks the document along the type it decodes into and
// records every duration field whose value does not parse. It returns
// whether every duration the type may hold there is plain: a string, not
// null, tagged or aliased, that parses as it is; the decoder's own
// conversion then reads each as lenientDuration would (decodeOptions).
func (f *File) checkDurations(n ast.Node, t reflect.Type, path string) bool {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	switch n := n.(type) {
	case nil:
		return true
	case *ast.TagNode:
		f.checkDurations(n.Value, t, path)
		return !holdsDuration(t)
	case *ast.AnchorNode:
		f.checkDurations(n.Value, t, path)
		return !holdsDuration(t)
	case *ast.AliasNode:
		return !holdsDuration(t)
	}
	switch {
	case t == durationType:
		s, ok := n.(ast.ScalarNode)
		if !ok {
			return false // the decoder reports a type mismatch
		}
		if _, null := n.(*ast.NullNode); null {
			return false
		}
		v := s.GetValue()
		text, isString := v.(string)
		if !isString {
			f.unparsable(path, "%v: want a duration with a unit, e.g. 10s or 500ms", v)
			return false
		}
		if _, err := time.ParseDuration(strings.TrimSpace(text)); err != nil {
			f.unparsable(path, "%q: want a duration such as 10s, 1.5m or 500ms (units ns, us, ms, s, m, h)", text)
			return false
		}
		return text == strings.TrimSpace(text)
	case t.Kind() == reflect.Struct:
		m, ok := n.(*ast.MappingNode)
		if !ok {
			if mv, single := n.(*ast.MappingValueNode); single {
				m = &ast.MappingNode{Values: []*ast.MappingValueNode{mv}}
			} else {
				return !holdsDuration(t)
			}
		}
		plain := true
		for _, mv := range m.Values {
			key := mv.Key.String()
			if sf, ok := fieldByTag(t, key); ok {
				plain = f.checkDurations(mv.Value, sf.Type, path+"."+key) && plain
			} else if key == "<<" { // a merge key brings fields unchecked
				plain = plain && !holdsDuration(t)
			}
		}
		return plain
	case t.Kind() == reflect.Slice:
		s, ok := n.(*ast.SequenceNode)
		if !ok {
			return !holdsDuration(t)
		}
		plain := true
		for i, e := range s.Values {
			plain = f.checkDurations(e, t.Elem(), fmt.Sprintf("%s[%d]", path, i)) && plain
		}
		return plain
	}
	return !holdsDuration(t) // not walked: a map, an array
}

// holdsDuration reports whether a value of type t may hold a duration the
// decoder converts (in a field, an element, a map value). Interfaces
// decode to plain values, never to a duration.
func holdsDuration(t reflect.Type) bool {
	if h, ok := holds.Load(t); ok {
		return h.(bool)
	}
	h := holdsDurationIn(t, map[reflect.Type]bool{})
	holds.Store(t, h)
	return h
}

var holds sync.Map // reflect.Type → bool

func holdsDurationIn(t reflect.Type, seen map[reflect.Type]bool) bool {
	if t == durationType {
		return true
	}
	if seen[t] {
		return false // a cycle: its durations are found where it starts
	}
	seen[t] = true
	switch t.Kind() {
	case reflect.Pointer, reflect.Slice, reflect.Array:
		return holdsDurationIn(t.Elem(), seen)
	case reflect.Map:
		return holdsDurationIn(t.Key(), seen) || holdsDurationIn(t.Elem(), seen)
	case reflect.Struct:
		for i := 0; i < t.NumField(); i++ {
			if sf := t.Field(i); sf.IsExported() && sf.Tag.Get("yaml") != "-" && holdsDurationIn(sf.Type, seen) {
				return true
			}
		}
	}
	return false
}

func fieldByTag(t reflect.Type, key string) (reflect.StructField, bool) {
	for i := 0; i < t.NumField(); i++ {
		sf := t.Field(i)
		name, _, _ := strings.Cut(sf.Tag.Get("yaml"), ",")
		if name == "" {
			name = strings.ToLower(sf.Name)
		}
		if sf.IsExported() && name == key {
			return sf, true
		}
	}
	return reflect.StructField{}, false
}

func (f *File) wrap(err error) error {
	var ye yaml.Error
	if errors.As(err, &ye) && ye.GetToken() != nil {
		p := ye.GetToken().Position
		return fmt.Errorf("%s:%d:%d: %s", f.Name, p.Line, p.Column, strings.TrimSpace(ye.GetMessage()))
	}
	return fmt.Errorf("%s: %v", f.Name, err)
}

// Errorf records a validation error about the field at path, a YAML path
// such as "$.passing.move_timeout" or "$.links[2].profile". The error names
// the file, and the line of the field when it is present in the file (else
// of its nearest present parent). A field whose value could not be
// converted has its error already.
func (f *File) Errorf(path, format string, a ...any) {
	if f.unparsed[path] {
		return
	}
	msg := fmt.Sprintf(format, a...)
	field := strings.TrimPrefix(path, "$.")
	line, col := f.locate(path)
	if line > 0 {
		f.errs = append(f.errs, fmt.Errorf("%s:%d:%d: %s: %s", f.Name, line, col, field, msg))
		return
	}
	f.errs = append(f.errs, fmt.Errorf("%s: %s: %s", f.Name, field, msg))
}

// Flagf records a validation error about a value that came from the
// command-line flag flag, not from the file: it names the flag, never a
// line of the file.
func (f *File) Flagf(flag, format string, a ...any) {
	f.errs = append(f.errs, fmt.Errorf("flag -%s: %s", flag, fmt.Sprintf(format, a...)))
}

func (f *File) unparsable(path, format string, a ...any) {
	f.Errorf(path, format, a...)
	if f.unparsed == nil {
		f.unparsed = map[string]bool{}
	}
	f.unparsed[path] = true
}

func (f *File) locate(path string) (int, int) {
	if f == nil || f.ast == nil {
		return 0, 0
	}
	for p := path; p != "$" && p != ""; {
		if yp, err := yaml.PathString(p); err == nil {
			if n, err := yp.FilterFile(f.ast); err == nil && n != nil && n.GetToken() != nil {
				pos := n.GetToken().Position
				return pos.Line, pos.Column
			}
		}
		i := strings.LastIndexAny(p, ".[")
		if i <= 0 {
			break
		}
		p = p[:i]
	}
	return 0, 0
}

// Add records an error found elsewhere (decoding a Node of the file),
// already naming the file and line.
func (f *File) Add(err error) {
	if err != nil {
		f.errs = append(f.errs, err)
	}
}

// Err returns every recorded validation error at once, or nil.
func (f *File) Err() error {
	if f == nil {
		return nil
	}
	return errors.Join(f.errs...)
}
