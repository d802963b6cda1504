package main

import (
	"bufio"
	"context"
	"io"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"tokenbed/internal/cli/clitest"
	"tokenbed/internal/resultsdb"
)

func TestServeHelp(t *testing.T) {
	clitest.HelpExitsZero(t, "harness", run, []clitest.Help{{Args: []string{"serve", "-h"}, Want: "harness serve"}})
	clitest.WrongFlagExitsTwo(t, "harness", run, [][]string{{"serve"}})
}

// TestServeListensAndStops: harness serve on an empty database answers
// on the address it prints, and stops when its context ends; a missing
// database is a usage error naming the flag.
func TestServeListensAndStops(t *testing.T) {
	root := t.TempDir()
	var stderr strings.Builder
	if code := cmdServe(t.Context(), []string{"--results", root}, io.Discard, &stderr, slog.New(slog.DiscardHandler)); code != exitUsage ||
		!strings.Contains(stderr.String(), "--db") {
		t.Fatalf("no database: exit %d, %q; want %d naming --db", code, stderr.String(), exitUsage)
	}
	db, err := resultsdb.Open(filepath.Join(root, "results.db"))
	if err != nil {
		t.Fatal(err)
	}
	db.Close()
	ctx, cancel := context.WithCancel(t.Context())
	pr, pw, _ := os.Pipe()
	done := make(chan int)
	go func() {
		done <- cmdServe(ctx, []string{"--addr", "127.0.0.1:0", "--results", root}, pw, io.Discard, slog.New(slog.DiscardHandler))
		pw.Close()
	}()
	line, err := bufio.NewReader(pr).ReadString('\n')
	if err != nil {
		t.Fatalf("reading the address: %v", err)
	}
	_, url, ok := strings.Cut(strings.TrimSpace(line), " on ")
	if !ok || !strings.HasPrefix(url, "http://127.0.0.1:") {
		t.Fatalf("printed %q, want the loopback URL", line)
	}
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || !strings.Contains(string(body), "No campaign indexed") {
		t.Fatalf("GET %s: %d\n%s", url, resp.StatusCode, body)
	}
	cancel()
	select {
	case code := <-done:
		if code != exitOK {
			t.Fatalf("exit %d after the context ended, want 0", code)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("harness serve did not stop when its context ended")
	}
}
