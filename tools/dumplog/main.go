// Command dumplog prints and verifies Samsa (and Apache Kafka) segment files,
// like Kafka's kafka-dump-log: the batches of a .log with their CRCs, the
// entries of a .index or .timeindex checked against the .log beside them,
// the producers of a .snapshot. The logic lives in engine.DumpSegment; this
// is its flag wrapper.
//
//	dumplog [-print-data-log] [-index-sanity-check] FILE...
//
// The exit code is 1 when a file has problems, 2 on usage or I/O errors.
package main

import (
	"errors"
	"flag"
	"fmt"
	"os"

	"github.com/samsa-broker/samsa/engine"
)

func main() {
	os.Exit(run(os.Args[1:]))
}

func run(args []string) int {
	fs := flag.NewFlagSet("dumplog", flag.ContinueOnError)
	records := fs.Bool("print-data-log", false, "print every record of uncompressed batches")
	sanity := fs.Bool("index-sanity-check", false, "check index files and print only the problems")
	fs.Usage = func() {
		fmt.Fprintln(fs.Output(), "usage: dumplog [-print-data-log] [-index-sanity-check] FILE...")
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		return 2
	}
	if fs.NArg() == 0 {
		fs.Usage()
		return 2
	}
	code := 0
	for _, path := range fs.Args() {
		err := engine.DumpSegment(os.Stdout, path, engine.DumpOptions{Records: *records, IndexSanityOnly: *sanity})
		switch {
		case err == nil:
		case errors.Is(err, engine.ErrDumpMismatch):
			code = max(code, 1)
		default:
			fmt.Fprintf(os.Stderr, "dumplog: %v\n", err)
			code = 2
		}
	}
	return code
}
