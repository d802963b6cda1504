package netem

import "testing"

var benchText = "limit 5000 delay 40ms 5ms 25% distribution normal loss gemodel 1% 10% 70% 0.1% ecn duplicate 1% reorder 25% 50% gap 5 corrupt 0.1% rate 100mbit 20"

// BenchmarkParse and BenchmarkString are reported against
// BenchmarkFieldsBaseline, which only splits the same text into words: the
// ratio says what tc-syntax parsing costs beyond tokenising.
func BenchmarkFieldsBaseline(b *testing.B) {
	for b.Loop() {
		_ = splitWords(benchText)
	}
}

func BenchmarkParse(b *testing.B) {
	for b.Loop() {
		if _, err := Parse(benchText); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkString(b *testing.B) {
	p, err := Parse(benchText)
	if err != nil {
		b.Fatal(err)
	}
	for b.Loop() {
		_ = p.String()
	}
}

func BenchmarkEncodeOptions(b *testing.B) {
	p, err := Parse(benchText)
	if err != nil {
		b.Fatal(err)
	}
	for b.Loop() {
		o, err := encodeOptions(p)
		if err != nil {
			b.Fatal(err)
		}
		_ = o.Serialize()
	}
}
