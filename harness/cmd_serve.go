package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"time"

	"tokenbed/harness/serve"
	"tokenbed/internal/cli"
	"tokenbed/internal/resultsdb"
)

// cmdServe serves the results browser (harness/serve) until interrupted.
func cmdServe(ctx context.Context, args []string, stdout, stderr io.Writer, log *slog.Logger) int {
	fs := flag.NewFlagSet("harness serve", flag.ContinueOnError)
	fs.SetOutput(stderr)
	addr := fs.String("addr", "127.0.0.1:8080", "listen `address`: loopback by default; any other address serves the results to the network, without authentication")
	results := fs.String("results", "results", "results `root`: the run directories the database indexes")
	dbPath := fs.String("db", "", "results database `file` (default RESULTS/results.db)")
	fs.Usage = func() {
		fmt.Fprintln(fs.Output(), "usage: harness serve [--addr 127.0.0.1:8080] [--results DIR] [--db FILE]")
		fs.PrintDefaults()
	}
	if code, stop := cli.Parse(fs, args, stdout); stop {
		return code
	}
	if fs.NArg() != 0 {
		fs.Usage()
		return exitUsage
	}
	if *dbPath == "" {
		*dbPath = filepath.Join(*results, "results.db")
	}
	if _, err := os.Stat(*dbPath); err != nil {
		fmt.Fprintf(stderr, "harness serve: --db %s: %v (harness index builds it from the results directories)\n", *dbPath, err)
		return exitUsage
	}
	db, err := resultsdb.Open(*dbPath)
	if err != nil {
		fmt.Fprintf(stderr, "harness serve: --db: %v\n", err)
		return exitUsage
	}
	defer db.Close()
	s, err := serve.New(serve.Config{Results: *results, DB: db, Log: log})
	if err != nil {
		fmt.Fprintf(stderr, "harness serve: --results: %v\n", err)
		return exitUsage
	}
	defer s.Close()
	ln, err := net.Listen("tcp", *addr)
	if err != nil {
		fmt.Fprintf(stderr, "harness serve: --addr: %v\n", err)
		return exitUsage
	}
	if ip := ln.Addr().(*net.TCPAddr).IP; !ip.IsLoopback() {
		log.Warn("serving beyond loopback, without authentication", "addr", ln.Addr())
	}
	fmt.Fprintf(stdout, "serving %s (database %s) on http://%s/\n", *results, *dbPath, ln.Addr())
	srv := &http.Server{Handler: s, ReadHeaderTimeout: 10 * time.Second}
	go func() {
		<-ctx.Done()
		shut, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		srv.Shutdown(shut)
	}()
	if err := srv.Serve(ln); !errors.Is(err, http.ErrServerClosed) {
		fmt.Fprintf(stderr, "harness serve: %v\n", err)
		return exitRunError
	}
	return exitOK
}
