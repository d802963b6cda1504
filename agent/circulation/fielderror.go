package circulation

import (
	"errors"
	"fmt"
)

// FieldError is an invalid field of a policy's configuration: Field names
// it as its section writes it ("hold", "regenerate_jitter"), Err says
// what is wrong. Validate methods return it so that Resolve can report
// the field by name (Env.Report) without reading it back from a message.
type FieldError struct {
	Field string
	Err   error
}

// Error is "field: what is wrong".
func (e *FieldError) Error() string { return e.Field + ": " + e.Err.Error() }

// Unwrap returns what is wrong with the field.
func (e *FieldError) Unwrap() error { return e.Err }

// Fieldf returns a *FieldError for field whose Err is
// fmt.Errorf(format, a...).
func Fieldf(field, format string, a ...any) error {
	return &FieldError{Field: field, Err: fmt.Errorf(format, a...)}
}

// Report reports err through e.Errorf: a *FieldError (in err's chain)
// under its field, any other error under the section itself, so that
// nothing a Validate returns is lost.
func (e Env) Report(err error) {
	if err == nil {
		return
	}
	var fe *FieldError
	if errors.As(err, &fe) {
		e.Errorf(fe.Field, "%v", fe.Err)
		return
	}
	e.Errorf("", "%v", err)
}
