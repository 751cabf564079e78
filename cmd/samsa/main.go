// Command samsa is the Samsa broker and its operator commands.
//
//	samsa serve [flags]        run a broker (the embedded default: one node, data in ./data)
//	samsa <command> [args]     operator commands; `samsa help` lists them
//
// Each subcommand lives in its own file and registers itself in commands from an
// init function, so this file never grows a switch.
package main

import (
	"fmt"
	"os"
	"sort"
)

// command is one subcommand. run receives the arguments after the subcommand name and
// returns the process exit code.
type command struct {
	summary string
	run     func(args []string) int
}

// commands is filled by init functions in this package's files (serve.go, ...).
var commands = map[string]command{}

func register(name, summary string, run func(args []string) int) {
	if _, dup := commands[name]; dup {
		panic("samsa: command registered twice: " + name)
	}
	commands[name] = command{summary: summary, run: run}
}

func usage() {
	fmt.Fprintln(os.Stderr, "usage: samsa <command> [flags]")
	names := make([]string, 0, len(commands))
	for n := range commands {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		fmt.Fprintf(os.Stderr, "  %-14s %s\n", n, commands[n].summary)
	}
}

func main() {
	if len(os.Args) < 2 || os.Args[1] == "help" || os.Args[1] == "-h" || os.Args[1] == "--help" {
		usage()
		if len(os.Args) < 2 {
			os.Exit(2)
		}
		return
	}
	c, ok := commands[os.Args[1]]
	if !ok {
		fmt.Fprintf(os.Stderr, "samsa: unknown command %q\n", os.Args[1])
		usage()
		os.Exit(2)
	}
	os.Exit(c.run(os.Args[2:]))
}
