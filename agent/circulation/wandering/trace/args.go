package trace

import (
	"strconv"
	"testing"
	"time"

	"github.com/cockroachdb/datadriven"
)

// Args reads a `new` command's key=value arguments: Dur and Int parse
// one, naming the script's position on error; Has and Str read them.
type Args struct {
	t  *testing.T
	td *datadriven.TestData
	m  map[string]string
}

// ArgsOf collects td's arguments.
func ArgsOf(t *testing.T, td *datadriven.TestData) Args {
	m := map[string]string{}
	for _, a := range td.CmdArgs {
		if len(a.Vals) > 0 {
			m[a.Key] = a.Vals[0]
		}
	}
	return Args{t, td, m}
}

// Str is the value of key, or "".
func (a Args) Str(key string) string { return a.m[key] }

// Dur is key as a duration (0 if absent).
func (a Args) Dur(key string) time.Duration {
	v, ok := a.m[key]
	if !ok {
		return 0
	}
	d, err := time.ParseDuration(v)
	if err != nil {
		a.t.Fatalf("%s: %s=%q: %v", a.td.Pos, key, v, err)
	}
	return d
}

// Float is key as a number (0 if absent).
func (a Args) Float(key string) float64 {
	v, ok := a.m[key]
	if !ok {
		return 0
	}
	f, err := strconv.ParseFloat(v, 64)
	if err != nil {
		a.t.Fatalf("%s: %s=%q: %v", a.td.Pos, key, v, err)
	}
	return f
}

// Int is key as an integer (def if absent).
func (a Args) Int(key string, def int) int {
	v, ok := a.m[key]
	if !ok {
		return def
	}
	i, err := strconv.Atoi(v)
	if err != nil {
		a.t.Fatalf("%s: %s=%q: %v", a.td.Pos, key, v, err)
	}
	return i
}
