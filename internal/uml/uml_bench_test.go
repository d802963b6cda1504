package uml_test

import (
	"context"
	"io"
	"log/slog"
	"os/exec"
	"testing"
	"time"

	"tokenbed/internal/uml"
)

// BenchmarkTrivialJob measures what a guest costs: boot to job start,
// the job itself (`true`: one fork/exec in the guest) and the total with
// shutdown, against starting `true` directly on the host (the baseline, in
// the same run). Pinned and unpinned instances, with and without the
// modules a netem topology loads.
//
//	go test -run '^$' -bench TrivialJob -benchtime 10x ./internal/uml/
func BenchmarkTrivialJob(b *testing.B) {
	b.Run("host-exec", func(b *testing.B) {
		for b.Loop() {
			if err := exec.Command("true").Run(); err != nil {
				b.Fatal(err)
			}
		}
	})
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	netemModules := []string{"sch_netem", "sch_htb", "cls_u32", "veth", "bridge", "tun", "ifb"}
	for _, c := range []struct {
		name    string
		cpu     int
		modules []string
	}{
		{"uml-pinned", 0, nil},
		{"uml-unpinned", -1, nil},
		{"uml-pinned-7-modules", 0, netemModules},
	} {
		b.Run(c.name, func(b *testing.B) {
			requireUML(b)
			var boot, job time.Duration
			n := 0
			for b.Loop() {
				res, err := uml.Run(context.Background(), uml.Job{Argv: []string{"true"}, CPU: c.cpu, Modules: c.modules, Timeout: time.Minute, Logger: quiet})
				if err != nil || !res.Success() {
					b.Fatalf("Run: %v %v", res, err)
				}
				boot += res.BootDuration
				job += res.Duration
				n++
			}
			b.ReportMetric(float64(boot.Milliseconds())/float64(n), "boot-ms/op")
			b.ReportMetric(float64(job.Microseconds())/1000/float64(n), "job-ms/op")
		})
	}
}
