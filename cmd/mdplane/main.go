// Command mdplane is the project's command line: offline checks and renders of ModelDeployments,
// and plans of their edits.
package main

import (
	"errors"
	"fmt"
	"io"
	"os"
	"runtime"
	"runtime/debug"

	"github.com/alecthomas/kong"
)

// version is set at build time with -ldflags "-X main.version=...".
var version = "dev"

type cli struct {
	Version     versionCmd     `cmd:"" help:"Print the mdplane version."`
	SchemaCheck schemaCheckCmd `cmd:"" name:"schema-check" help:"Check manifests against the generated CRD and XRD schemas, offline, with the API server's own validation."`
	Validate    validateCmd    `cmd:"" help:"Admit manifests offline as a cluster would: the schema, then mdplane's admission rules. Silent when admitted."`
	Render      renderCmd      `cmd:"" help:"Render ModelDeployments offline into every object their Compositions compose, down to the Pods."`
	Plan        planCmd        `cmd:"" help:"Tell what applying an edit of a ModelDeployment will do: which roles roll or scale and why, in what order, against what quota, and what changes in the Pods. Exits 1 when admission refuses the edit."`
}

// env carries the streams a subcommand writes to, so tests can read them.
type env struct {
	stdout, stderr io.Writer
}

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

// run parses args and runs one subcommand. It returns the process exit code: 0 on success, 1 when a
// check found violations or the command failed, 2 on a usage error.
func run(args []string, stdout, stderr io.Writer) int {
	var c cli
	exit := -1
	parser, err := kong.New(&c,
		kong.Name("mdplane"),
		kong.Description("A Crossplane-native control plane for LLM inference deployments."),
		kong.Writers(stdout, stderr),
		kong.Exit(func(code int) { exit = code }),
		kong.UsageOnError(),
	)
	if err != nil {
		fmt.Fprintln(stderr, "mdplane:", err)
		return 2
	}
	ctx, err := parser.Parse(args)
	if exit >= 0 {
		return exit
	}
	if err != nil {
		fmt.Fprintln(stderr, "mdplane:", err)
		return 2
	}
	if err := ctx.Run(&env{stdout: stdout, stderr: stderr}); err != nil {
		if !errors.Is(err, errViolations) && !errors.Is(err, errRefused) { // already reported one per line
			fmt.Fprintln(stderr, "mdplane:", err)
		}
		return 1
	}
	return 0
}

type versionCmd struct{}

func (versionCmd) Run(e *env) error { //nolint:unparam // kong requires a command's Run to return an error
	fmt.Fprintf(e.stdout, "mdplane %s (%s, %s/%s)\n", moduleVersion(), runtime.Version(), runtime.GOOS, runtime.GOARCH)
	return nil
}

// moduleVersion prefers the version stamped at build time, then the module version go install
// records.
func moduleVersion() string {
	if version != "dev" {
		return version
	}
	if info, ok := debug.ReadBuildInfo(); ok && info.Main.Version != "" && info.Main.Version != "(devel)" {
		return info.Main.Version
	}
	return version
}
