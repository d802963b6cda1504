package strictyaml

import (
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
)

// A 50 MB file is refused with a clear error, without reading it all (a
// whole-file YAML decode of it takes gigabytes of memory).
func TestLoadRefusesHugeFile(t *testing.T) {
	p := filepath.Join(t.TempDir(), "huge.yaml")
	f, err := os.Create(p)
	if err != nil {
		t.Fatal(err)
	}
	line := []byte("# padding padding padding padding padding padding padding padding\n")
	for n := 0; n < 50<<20; n += len(line) {
		f.Write(line)
	}
	f.WriteString("name: x\n")
	f.Close()
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	var v struct {
		Name string `yaml:"name"`
	}
	_, err = Load(p, &v)
	runtime.ReadMemStats(&after)
	if err == nil || !strings.Contains(err.Error(), p) || !strings.Contains(err.Error(), "larger than 1024 KiB") {
		t.Fatalf("want a size error naming the file, got %v", err)
	}
	if alloc := after.TotalAlloc - before.TotalAlloc; alloc > 8<<20 {
		t.Errorf("refusing the file allocated %d MB", alloc>>20)
	}
}
