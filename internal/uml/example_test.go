package uml_test

import (
	"context"
	"fmt"
	"log"
	"os"
	"time"

	"tokenbed/internal/uml"
)

// Apply real netem inside a guest, with the host's tc.
func ExampleRun() {
	res, err := uml.Run(context.Background(), uml.Job{
		Argv:    []string{"sh", "-c", "tc qdisc add dev lo root netem delay 10ms && tc qdisc show dev lo"},
		Modules: []string{"sch_netem"},
		CPU:     0,
		Timeout: time.Minute,
		Stdout:  os.Stdout,
		Stderr:  os.Stderr,
	})
	if err != nil {
		log.Fatal(err) // e.g. uml.ErrNotInstalled: run `make deps`
	}
	fmt.Println(res) // exit status 0
}

// One instance per host CPU, each pinned to its own.
func ExamplePool() {
	pool, err := uml.NewPool(0)
	if err != nil {
		log.Fatal(err)
	}
	results := make(chan *uml.Result)
	for _, seed := range []int{1, 2, 3, 4} {
		go func() {
			res, err := pool.Run(context.Background(), uml.Job{Argv: []string{"./experiment", fmt.Sprint("-seed=", seed)}})
			if err != nil {
				log.Print(err)
			}
			results <- res
		}()
	}
	for range 4 {
		<-results
	}
}
