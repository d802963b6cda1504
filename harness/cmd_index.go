package main

import (
	"flag"
	"fmt"
	"io"
	"path/filepath"

	"tokenbed/analysis/index"
	"tokenbed/internal/cli"
	"tokenbed/internal/resultsdb"
)

// cmdIndex is harness index: it rebuilds the results database from the
// results directories, which stay the source of truth. A damaged or older
// directory is indexed as far as it can be read and flagged, never fatal.
func cmdIndex(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("harness index", flag.ContinueOnError)
	fs.SetOutput(stderr)
	root := fs.String("results", "results", "results root: its run directories and campaigns/")
	dbPath := fs.String("db", "", "database file (default: RESULTS/"+index.DBFile+")")
	if code, stop := cli.Parse(fs, args, stdout); stop {
		return code
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(stderr, "harness index: unexpected argument %q\n", fs.Arg(0))
		return exitUsage
	}
	if *dbPath == "" {
		*dbPath = filepath.Join(*root, index.DBFile)
	}
	db, err := resultsdb.Open(*dbPath)
	if err != nil {
		fmt.Fprintln(stderr, "harness index:", err)
		return exitRunError
	}
	defer db.Close()
	st, err := index.Rebuild(*root, db)
	if err != nil {
		fmt.Fprintln(stderr, "harness index:", err)
		return exitRunError
	}
	fmt.Fprintf(stdout, "indexed %s into %s\n", st, *dbPath)
	if st.Damaged > 0 {
		fmt.Fprintf(stdout, "damaged runs: sqlite3 %s \"SELECT id, damaged FROM runs WHERE damaged != ''\"\n", *dbPath)
	}
	return exitOK
}
