package policies_test

import (
	"errors"
	"fmt"
	"testing"
	"time"

	"tokenbed/agent/circulation"
	"tokenbed/agent/circulation/baseline"
	"tokenbed/agent/circulation/randomwalk"
	"tokenbed/agent/circulation/wandering"
	"tokenbed/agent/circulation/wandering004"
)

// Every policy's Validate names the invalid field in a *FieldError that
// errors.As finds, with the message its users print unchanged.
func TestValidateReturnsFieldError(t *testing.T) {
	for _, c := range []struct {
		policy string
		err    error
		field  string
		msg    string
	}{
		{"baseline", baseline.Config{Op: 4 * time.Second, Rule: "x"}.Validate(), "rule",
			`rule: "x": want "003" (1200 ± 600 s, seed 003 §3) or "004" (Δmin + U[0, Δmin/2], seed 004 §2)`},
		{"randomwalk", randomwalk.Config{Hold: time.Second, RegenerateJitter: 1.5}.Validate(), "regenerate_jitter",
			"regenerate_jitter: must be in [0, 1), got 1.5"},
		{"wandering", wandering.Config{Op: time.Second, Skip: 2 * time.Second, NMax: 3}.Validate(), "skip",
			"skip: must be in [0, op), got 2s (seed 003 assumes Δskip ≪ Δop)"},
		{"wandering-004", wandering004.Config{Op: time.Second, Min: time.Second, K1: 1.5, K2: 2}.Validate(), "k2",
			"k2: must be in [0, 1], got 2"},
	} {
		var fe *circulation.FieldError
		if !errors.As(c.err, &fe) {
			t.Errorf("%s: Validate() = %v (%T), want a *circulation.FieldError", c.policy, c.err, c.err)
			continue
		}
		if fe.Field != c.field || c.err.Error() != c.msg || errors.Unwrap(c.err) != fe.Err {
			t.Errorf("%s: field %q, message %q; want field %q, message %q, unwrapping to what is wrong",
				c.policy, fe.Field, c.err.Error(), c.field, c.msg)
		}
	}
}

// Resolve reports the invalid field by name through Env.Errorf, the
// message without the field's prefix; an error that names no field is
// reported under the section itself, not lost.
func TestResolveReportsField(t *testing.T) {
	type report struct{ field, msg string }
	for _, c := range []struct {
		policy  string
		resolve func(circulation.Env)
		want    report
	}{
		{"baseline", func(e circulation.Env) { (&baseline.Section{Rule: "x"}).Resolve(e) },
			report{"rule", `"x": want "003" (1200 ± 600 s, seed 003 §3) or "004" (Δmin + U[0, Δmin/2], seed 004 §2)`}},
		{"randomwalk", func(e circulation.Env) {
			j := 1.5
			(&randomwalk.Section{RegenerateJitter: &j}).Resolve(e)
		}, report{"regenerate_jitter", "must be in [0, 1), got 1.5"}},
		{"wandering", func(e circulation.Env) { (&wandering.Section{Op: time.Second, Skip: 2 * time.Second}).Resolve(e) },
			report{"skip", "must be in [0, op), got 2s (seed 003 assumes Δskip ≪ Δop)"}},
		{"wandering-004", func(e circulation.Env) { (&wandering004.Section{K1: 1.5, K2: 2}).Resolve(e) },
			report{"k2", "must be in [0, 1], got 2"}},
		{"not a field", func(e circulation.Env) { e.Report(errors.New("no such thing")) },
			report{"", "no such thing"}},
	} {
		var got []report
		env := circulation.Env{TimeScale: 1, Transit: time.Second, Errorf: func(field, format string, a ...any) {
			got = append(got, report{field, fmt.Sprintf(format, a...)})
		}}
		c.resolve(env)
		if len(got) != 1 || got[0] != c.want {
			t.Errorf("%s: reported %q, want one report %q", c.policy, got, c.want)
		}
	}
}
