package dist

import (
	"bytes"
	"errors"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
)

// tcLibDirs are where Debian's and Fedora's iproute2 install the .dist files.
var tcLibDirs = []string{"/usr/lib/x86_64-linux-gnu/tc", "/usr/lib/tc", "/usr/lib64/tc", "/usr/share/tc"}

func installed(t *testing.T, name string) []byte {
	t.Helper()
	for _, d := range tcLibDirs {
		b, err := os.ReadFile(filepath.Join(d, name+".dist"))
		if err == nil {
			return b
		}
	}
	t.Skipf("iproute2's %s.dist is not installed in any of %v (apt-get install iproute2)", name, tcLibDirs)
	return nil
}

// TestGeneratedTablesMatchIproute2 checks the Go ports of normal.c, pareto.c
// and paretonormal.c against the files iproute2 installed, byte for byte
// (the text) and value for value.
func TestGeneratedTablesMatchIproute2(t *testing.T) {
	for _, name := range []string{Normal, Pareto, ParetoNormal} {
		t.Run(name, func(t *testing.T) {
			want := installed(t, name)
			got, ok := Builtin(name)
			if !ok {
				t.Fatalf("Builtin(%q) missing", name)
			}
			if len(got) != 4096 {
				t.Fatalf("len = %d, want 4096", len(got))
			}
			wantVals, err := Parse(bytes.NewReader(want), name)
			if err != nil {
				t.Fatal(err)
			}
			diff := 0
			for i := range wantVals {
				if got[i] != wantVals[i] {
					if diff < 5 {
						t.Errorf("entry %d = %d, iproute2 has %d", i, got[i], wantVals[i])
					}
					diff++
				}
			}
			if diff > 0 {
				t.Fatalf("%d of %d entries differ", diff, len(wantVals))
			}
			var buf bytes.Buffer
			if err := Format(&buf, name, got, true); err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(buf.Bytes(), want) {
				t.Fatalf("formatted table differs from the installed file (%d vs %d bytes)", buf.Len(), len(want))
			}
		})
	}
}

func TestEmbeddedExperimentalMatchesIproute2(t *testing.T) {
	want := installed(t, Experimental)
	got, _ := Builtin(Experimental)
	var buf bytes.Buffer
	if err := Format(&buf, Experimental, got, false); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(buf.Bytes(), want) {
		t.Fatal("embedded experimental table, formatted as maketable prints it, differs from the installed file")
	}
}

func TestBuiltinReturnsCopy(t *testing.T) {
	a, _ := Builtin(Normal)
	a[0] = 1
	b, _ := Builtin(Normal)
	if b[0] == 1 {
		t.Fatal("Builtin shares its table with callers")
	}
	if _, ok := Builtin("uniform"); ok {
		t.Fatal("uniform is netem's table-less default, not a table")
	}
}

// TestTableShapes checks the statistical meaning of the tables: normal is a
// symmetric quantile function with unit sigma at Scale.
func TestTableShapes(t *testing.T) {
	n, _ := Builtin(Normal)
	if !sort.SliceIsSorted(n, func(i, j int) bool { return n[i] < n[j] }) {
		t.Fatal("normal table is not non-decreasing")
	}
	var sum, sq float64
	for _, v := range n[1:] { // entry 0 is the clamped -inf tail
		f := float64(v) / Scale
		sum += f
		sq += f * f
	}
	m := float64(len(n) - 1)
	mean, sd := sum/m, math.Sqrt(sq/m-(sum/m)*(sum/m))
	if math.Abs(mean) > 0.01 || math.Abs(sd-1) > 0.02 {
		t.Fatalf("normal table mean %.4f sd %.4f, want ~0 and ~1", mean, sd)
	}
}

func TestParseErrorsNameFileAndLine(t *testing.T) {
	cases := []struct{ in, want string }{
		{"# c\n1 2 3\n4 x 5\n", "t.dist:3: \"x\" is not an integer"},
		{"1\n40000\n", "t.dist:2: 40000 does not fit in 16 bits"},
		{"# only a comment\n", "t.dist:1: no values"},
	}
	for _, c := range cases {
		_, err := Parse(strings.NewReader(c.in), "t.dist")
		var le *LineError
		if !errors.As(err, &le) || err.Error() != c.want {
			t.Errorf("Parse(%q) = %v, want %q", c.in, err, c.want)
		}
	}
	big := strings.Repeat("1 ", MaxEntries+1)
	if _, err := Parse(strings.NewReader(big), "big.dist"); err == nil || !strings.Contains(err.Error(), "NETEM_DIST_MAX") {
		t.Fatalf("oversized table: %v", err)
	}
	got, err := Parse(strings.NewReader("0x10 -010 +7\n\n   \n"), "c.dist")
	if err != nil || len(got) != 3 || got[0] != 16 || got[1] != -8 || got[2] != 7 {
		t.Fatalf("strtol spellings: %v %v", got, err)
	}
}

func TestLoad(t *testing.T) {
	p := filepath.Join(t.TempDir(), "my.dist")
	if err := os.WriteFile(p, []byte("# mine\n1 2\n3 bad\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	_, err := Load(p)
	if err == nil || !strings.HasPrefix(err.Error(), p+":3:") {
		t.Fatalf("Load error %v does not name %s:3", err, p)
	}
	if _, err := Load(filepath.Join(t.TempDir(), "none.dist")); err == nil {
		t.Fatal("Load of a missing file succeeded")
	}
}

// TestFromSamplesNormal feeds maketable's port with seeded normal samples:
// the table must be close to the analytic normal table.
func TestFromSamplesNormal(t *testing.T) {
	const seed = 20240501
	r := rand.New(rand.NewPCG(seed, seed))
	x := make([]float64, 200000)
	for i := range x {
		x[i] = 40 + 5*r.NormFloat64()
	}
	tab, mu, sigma, _, err := FromSamples(x)
	if err != nil {
		t.Fatal(err)
	}
	if math.Abs(mu-40) > 0.05 || math.Abs(sigma-5) > 0.05 {
		t.Fatalf("seed %d: mu %.3f sigma %.3f", seed, mu, sigma)
	}
	ref, _ := Builtin(Normal)
	// Compare the central quantiles (tails are noisy with finite samples).
	for i := 400; i < 3700; i += 100 {
		if d := math.Abs(float64(tab[i]-ref[i])) / Scale; d > 0.05 {
			t.Errorf("seed %d: quantile %d = %.3f sigma, normal table %.3f", seed, i, float64(tab[i])/Scale, float64(ref[i])/Scale)
		}
	}
	if _, _, _, _, err := FromSamples([]float64{1, 1, 1}); err == nil {
		t.Fatal("constant samples accepted")
	}
}
