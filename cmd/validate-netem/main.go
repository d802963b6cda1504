// Command validate-netem cross-validates the userspace netem engine against
// real sch_netem: every profile of validate.Profiles runs through kernel
// netem on a veth inside a User Mode Linux guest and through the userspace
// engine (a TUN relay) between two network namespaces of this host; the
// command prints a markdown table of the differences with PASS/FAIL per
// metric and exits 1 if any profile fails. It needs root and UML (`make
// deps`). Inside the guest the same binary (built with CGO_ENABLED=0) runs
// the kernel side.
//
//	validate-netem [-n 2000] [-seed N] [-only SUBSTRING]
package main

import (
	"context"
	"crypto/rand"
	"encoding/binary"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"runtime/debug"
	"strings"
	"syscall"
	"time"

	"tokenbed/internal/uml"
	"tokenbed/netem/validate"
)

func main() {
	log := slog.New(slog.NewTextHandler(os.Stderr, nil))
	if uml.InGuest() && os.Getenv(validate.JobEnv) != "" {
		if err := validate.GuestMain(log); err != nil {
			fmt.Fprintln(os.Stderr, "validate-netem (guest):", err)
			os.Exit(1)
		}
		return
	}
	n := flag.Int("n", 2000, "probes per profile")
	seed := flag.Uint64("seed", 0, "seed (0: random, printed)")
	only := flag.String("only", "", "run only the profiles whose text contains this")
	verbose := flag.Bool("v", false, "log progress")
	flag.Parse()
	if !*verbose {
		log = slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	}
	os.Exit(run(log, *n, *seed, *only))
}

func run(log *slog.Logger, n int, seed uint64, only string) int {
	if os.Geteuid() != 0 {
		fmt.Fprintln(os.Stderr, "validate-netem: needs root (network namespaces, TUN devices)")
		return 2
	}
	if seed == 0 {
		var b [8]byte
		rand.Read(b[:])
		seed = binary.LittleEndian.Uint64(b[:]) | 1
	}
	var b [3]byte
	rand.Read(b[:])
	runID := fmt.Sprintf("tb%02x%02x%02x", b[0], b[1], b[2])
	specs := []validate.Spec{validate.CalibrationSpec(n)}
	for _, s := range validate.Profiles(n) {
		if only == "" || strings.Contains(s.Name, only) {
			specs = append(specs, s)
		}
	}
	exe, err := os.Executable()
	if err != nil {
		fmt.Fprintln(os.Stderr, "validate-netem:", err)
		return 2
	}
	if bi, ok := debug.ReadBuildInfo(); ok {
		for _, s := range bi.Settings {
			if s.Key == "CGO_ENABLED" && s.Value != "0" {
				log.Warn("this binary was not built with CGO_ENABLED=0 (make validate-netem does that); the guest runs it through hostfs anyway")
			}
		}
	}
	cfg := validate.Config{RunID: runID, Seed: seed, Log: log}
	start := time.Now()
	fmt.Printf("# netem cross-validation: kernel sch_netem (UML guest) vs userspace engine (TUN relay, host)\n\n")
	fmt.Printf("run ID %s, seed %d (probe padding of profile i: seed + i·0x9e3779b97f4a7c15; engine seed = seed), %d probes per profile\n\n", runID, seed, n)
	// Interrupted: stop the guest and tidy the namespaces before exiting.
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	var guestOut strings.Builder
	kt, err := validate.RunKernelInUML(ctx, []string{exe}, cfg, specs, &guestOut)
	if err != nil {
		fmt.Fprintf(os.Stderr, "validate-netem: kernel side: %v\nguest output:\n%s\n", err, guestOut.String())
		return 2
	}
	kDur := time.Since(start)
	// The host replays the guest's actual send times (see RunProbes).
	ut, err := validate.RunUserspace(ctx, cfg, validate.WithReplay(specs, kt))
	if err != nil {
		fmt.Fprintf(os.Stderr, "validate-netem: userspace side: %v\n", err)
		return 2
	}
	if left := validate.Leftovers(runID); len(left) > 0 {
		fmt.Fprintf(os.Stderr, "validate-netem: namespaces left behind: %v\n", left)
	}
	calK := validate.Calibration(kt[0], validate.CalibrationMS)
	calU := validate.Calibration(ut[0], validate.CalibrationMS)
	fmt.Printf("calibration (%q, median one-way delay − 2 ms, subtracted from every delay of that side): kernel/guest %.3f ms, userspace/host %.3f ms\n\n", validate.CalibrationProfile, calK, calU)
	fmt.Print(validate.TolerancesText)
	fmt.Println()
	var results []validate.Result
	failed := 0
	for i := 1; i < len(specs); i++ {
		r := validate.Compare(specs[i].Name, kt[i], ut[i], calK, calU)
		results = append(results, r)
		if !r.Pass {
			failed++
		}
	}
	fmt.Print(validate.Markdown(results))
	fmt.Println()
	for _, r := range results {
		fmt.Printf("- %s: %s\n", r.Name, r.Info)
	}
	fmt.Printf("\n%d of %d profiles failed; kernel side %v, total %v; load average: %s\n", failed, len(results), kDur.Round(time.Second), time.Since(start).Round(time.Second), loadavg())
	if failed > 0 {
		return 1
	}
	return 0
}

func loadavg() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "?"
	}
	f := strings.Fields(string(b))
	if len(f) < 3 {
		return "?"
	}
	return strings.Join(f[:3], " ")
}
