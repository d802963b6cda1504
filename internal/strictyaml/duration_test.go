package strictyaml

import (
	"fmt"
	"reflect"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/goccy/go-yaml"
	"github.com/goccy/go-yaml/parser"
)

type durations struct {
	A  time.Duration             `yaml:"a"`
	P  *time.Duration            `yaml:"p"`
	L  []time.Duration           `yaml:"l"`
	In struct{ B time.Duration } `yaml:"in"`
	M  map[string]time.Duration  `yaml:"m"`
	X  time.Duration             `yaml:"x"`
	N  int                       `yaml:"n"`
}

// plainDoc is checkDurations' verdict on doc decoded as durations.
func plainDoc(t *testing.T, doc string) bool {
	t.Helper()
	a, err := parser.ParseBytes([]byte(doc), 0)
	if err != nil {
		t.Fatal(err)
	}
	f := &File{Name: "x.yaml", ast: a}
	return f.checkDurations(a.Docs[0].Body, reflect.TypeOf(durations{}), "$")
}

// Plain durations are decoded by the decoder's own conversion, which reads
// them as lenientDuration does; anything else (null, a number, spaces, a
// tag, an alias, a map of durations, a bad one) takes the lenient path, so
// that a bad duration is still a validation error at its line that reads
// as zero, never a decode error.
func TestDurationsPlainOrLenient(t *testing.T) {
	plain := "a: 2s\np: 1m30s\nl: [1ms, 2h]\nin: {b: 500ms}\nn: 3\n"
	if !plainDoc(t, plain) {
		t.Fatal("a plain document found not plain")
	}
	var fast, lenient durations
	for _, c := range []struct {
		v     *durations
		plain bool
	}{{&fast, true}, {&lenient, false}} {
		if err := yaml.UnmarshalWithOptions([]byte(plain), c.v, decodeOptions(c.plain)...); err != nil {
			t.Fatal(err)
		}
	}
	if !reflect.DeepEqual(fast, lenient) || fast.A != 2*time.Second || *fast.P != 90*time.Second || fast.In.B != 500*time.Millisecond {
		t.Fatalf("plain %+v, lenient %+v", fast, lenient)
	}

	for _, c := range []struct {
		doc  string
		errs string
		want time.Duration // of a
	}{
		{"a: null\n", "", 0},
		{"a: 5\n", "x.yaml:1:4: a: 5: want a duration with a unit", 0},
		{"a: \" 2s \"\n", "", 2 * time.Second},
		{"a: 10 parsecs\nin: {b: 1s}\n", `x.yaml:1:4: a: "10 parsecs": want a duration`, 0},
		{"a: !!str 2s\n", "", 2 * time.Second},
		{"x: &d 2s\na: *d\n", "", 2 * time.Second},
		{"m: {k: 1s}\n", "", 0},
		{"l: [1s, soon]\n", `x.yaml:1:9: l[1]: "soon": want a duration`, 0},
	} {
		if plainDoc(t, c.doc) {
			t.Errorf("%q: found plain", c.doc)
		}
		var v durations
		f, err := Decode("x.yaml", []byte(c.doc), &v)
		if err != nil {
			t.Errorf("%q: a decode error %v, want a lenient decode", c.doc, err)
			continue
		}
		got := ""
		if e := f.Err(); e != nil {
			got = e.Error()
		}
		if c.errs == "" && got != "" || c.errs != "" && !strings.Contains(got, c.errs) {
			t.Errorf("%q: errors %q, want %q", c.doc, got, c.errs)
		}
		if v.A != c.want {
			t.Errorf("%q: a = %v, want %v", c.doc, v.A, c.want)
		}
	}
}

// Decoding one entry's durations costs the same whatever the size of the
// file around it (the lenient path formatted the whole file for each
// duration: an experiment's agents cost O(n²) to decode).
func TestNodeDurationsIndependentOfFileSize(t *testing.T) {
	alloc := func(n int) uint64 {
		var b strings.Builder
		b.WriteString("items:\n")
		for i := range n {
			fmt.Fprintf(&b, "  - {name: a%d, conf: {a: 2s, l: [1s, 2s], in: {b: 3s}}}\n", i)
		}
		var doc struct {
			Items []struct {
				Name string `yaml:"name"`
				Conf Node   `yaml:"conf"`
			} `yaml:"items"`
		}
		if _, err := Decode("x.yaml", []byte(b.String()), &doc); err != nil {
			t.Fatal(err)
		}
		var before, after runtime.MemStats
		runtime.GC()
		runtime.ReadMemStats(&before)
		for range 10 {
			var v durations
			if err := doc.Items[n/2].Conf.Decode(&v); err != nil || v.In.B != 3*time.Second {
				t.Fatalf("%+v %v", v, err)
			}
		}
		runtime.ReadMemStats(&after)
		return after.TotalAlloc - before.TotalAlloc
	}
	small, large := alloc(10), alloc(2000)
	if large > 2*small {
		t.Errorf("decoding one entry allocated %d bytes in a file of 2,000 entries, %d in a file of 10", large, small)
	}
}
