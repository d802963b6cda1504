// Package strictyaml decodes YAML configuration files strictly (unknown
// fields are errors) and reports every problem as FILE:LINE:COL: message,
// whether the YAML decoder or the caller's validation found it.
package strictyaml

import (
	"errors"
	"fmt"
	"os"
	"strings"

	"github.com/goccy/go-yaml"
	"github.com/goccy/go-yaml/ast"
	"github.com/goccy/go-yaml/parser"
)

// File is a decoded YAML file kept for locating fields in errors.
type File struct {
	Name string
	ast  *ast.File
	errs []error
}

// Load reads path and decodes it into v, strictly.
func Load(path string, v any) (*File, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	return Decode(path, b, v)
}

// Decode decodes data (named name in errors) into v, strictly.
func Decode(name string, data []byte, v any) (*File, error) {
	f := &File{Name: name}
	a, err := parser.ParseBytes(data, 0)
	if err != nil {
		return nil, f.wrap(err)
	}
	f.ast = a
	if err := yaml.UnmarshalWithOptions(data, v, yaml.Strict()); err != nil {
		return nil, f.wrap(err)
	}
	return f, nil
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
// of its nearest present parent).
func (f *File) Errorf(path, format string, a ...any) {
	msg := fmt.Sprintf(format, a...)
	field := strings.TrimPrefix(path, "$.")
	line, col := f.locate(path)
	if line > 0 {
		f.errs = append(f.errs, fmt.Errorf("%s:%d:%d: %s: %s", f.Name, line, col, field, msg))
		return
	}
	f.errs = append(f.errs, fmt.Errorf("%s: %s: %s", f.Name, field, msg))
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

// Err returns every recorded validation error at once, or nil.
func (f *File) Err() error {
	if f == nil {
		return nil
	}
	return errors.Join(f.errs...)
}
