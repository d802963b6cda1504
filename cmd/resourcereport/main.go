// Command resourcereport prints the concurrency of a run's shared
// resource from its agents' logs and from the resource server's own log,
// side by side (analysis/resource). Exit status 1 when they disagree
// beyond resource.Tolerance, 2 on a usage or read error.
//
//	go run ./cmd/resourcereport results/RUNID
package main

import (
	"fmt"
	"os"

	"tokenbed/analysis/resource"
)

func main() {
	if len(os.Args) != 2 {
		fmt.Fprintln(os.Stderr, "usage: resourcereport RESULTS_DIR")
		os.Exit(2)
	}
	r, err := resource.AnalyzeRun(os.Args[1])
	if err != nil {
		fmt.Fprintln(os.Stderr, "resourcereport:", err)
		os.Exit(2)
	}
	fmt.Print(r)
	for _, x := range r.Replicas {
		if x.Diff > resource.Tolerance {
			os.Exit(1)
		}
	}
}
