package render

import (
	"bufio"
	"bytes"
	"context"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/yaml"

	"github.com/mdplane/mdplane/internal/pipeline"
)

// recipeHeading is the README section whose first bash block is the `crossplane render` recipe.
const recipeHeading = "## The same render with Crossplane's CLI"

// recipe is the README's `crossplane render` recipe, read into what the test runs.
type recipe struct {
	// cliVersion is the Crossplane CLI the recipe installs.
	cliVersion string
	// background are the commands the recipe starts with `&`: the functions.
	background []string
	// render is the `crossplane render` command line.
	render string
}

var (
	cliInstall    = regexp.MustCompile(`^go install github\.com/crossplane/cli/v2/cmd/crossplane@(v\S+)$`)
	engineVersion = regexp.MustCompile(`--crossplane-version=(\S+)`)
)

// argument is the render's i-th positional argument: the composite, the Composition, the Functions.
func (r recipe) argument(t *testing.T, i int) string {
	t.Helper()
	var args []string
	for _, f := range strings.Fields(r.render)[2:] {
		if !strings.HasPrefix(f, "-") {
			args = append(args, f)
		}
	}
	if i >= len(args) {
		t.Fatalf("the recipe's render has no argument %d: %q", i, r.render)
	}
	return args[i]
}

// readRecipe reads the first bash block after the recipe's heading, joining continued lines.
func readRecipe(t *testing.T, readme []byte) recipe {
	t.Helper()
	_, section, found := strings.Cut(string(readme), "\n"+recipeHeading+"\n")
	if !found {
		t.Fatalf("README.md has no section %q", recipeHeading)
	}
	_, block, found := strings.Cut(section, "```bash\n")
	if !found {
		t.Fatalf("README.md's %q has no bash block", recipeHeading)
	}
	block, _, _ = strings.Cut(block, "```")
	var r recipe
	var line string
	sc := bufio.NewScanner(strings.NewReader(block))
	for sc.Scan() {
		line += strings.TrimSpace(sc.Text())
		if strings.HasSuffix(line, `\`) {
			line = strings.TrimSuffix(line, `\`) + " "
			continue
		}
		switch m := cliInstall.FindStringSubmatch(line); {
		case m != nil:
			r.cliVersion = m[1]
		case strings.HasSuffix(line, "&"):
			r.background = append(r.background, strings.TrimSuffix(line, "&"))
		case strings.HasPrefix(line, "crossplane render "):
			r.render = line
		case line != "":
			t.Fatalf("README.md's render recipe has a line this test does not know how to run: %q", line)
		}
		line = ""
	}
	if r.cliVersion == "" || r.render == "" || len(r.background) == 0 {
		t.Fatalf("README.md's render recipe lacks the CLI's install, the functions or the render: %+v", r)
	}
	return r
}

// TestReadmeRenderRecipe runs the README's `crossplane render` recipe as written, from the
// repository's root: the functions by its own `go run` lines, then the render with the Crossplane CLI
// version it installs. The one change: this machine has no Docker, so the engine the recipe names by
// version (`--crossplane-version`) runs from the core binary of that version (`--crossplane-binary`),
// as the README tells users without Docker. Its output must be mdplane's own render of that level.
func TestReadmeRenderRecipe(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the Crossplane CLI and runs the functions; not in -short")
	}
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	readme, err := os.ReadFile(filepath.Join(root, "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	r := readRecipe(t, readme)

	m := engineVersion.FindStringSubmatch(r.render)
	if len(m) < 2 || m[1] != crossplaneVersion {
		t.Fatalf("the recipe's render must name the engine mdplane is tested with, --crossplane-version=%s: %q", crossplaneVersion, r.render)
	}
	cli := crossplaneCLI(t, r.cliVersion)
	command := "exec " + cli + strings.TrimPrefix(engineVersion.ReplaceAllString(r.render, "--crossplane-binary="+crossplaneBinary(t)), "crossplane")

	for _, fn := range r.background {
		start(t, root, fn)
	}
	for _, target := range developmentTargets(t, filepath.Join(root, r.argument(t, 2))) {
		waitListening(t, target, 5*time.Minute)
	}

	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	var stdout, stderr bytes.Buffer
	cmd := exec.CommandContext(ctx, "bash", "-c", command)
	cmd.Dir, cmd.Stdout, cmd.Stderr = root, &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("%s: %v\n%s", command, err, stderr.String())
	}
	docs := splitYAML(t, stdout.Bytes())
	if len(docs) == 0 || docs[0]["kind"] != "ModelDeployment" {
		t.Fatalf("crossplane render printed no ModelDeployment first:\n%s", stdout.String())
	}

	ours := mdplaneLevel(t, root, r)
	compareOutput(t, ours, docs[0], docs[1:])
	t.Logf("crossplane CLI %s with engine %s: %d composed resources, as mdplane renders them", r.cliVersion, crossplaneVersion, len(docs)-1)
}

// crossplaneCLI builds the Crossplane CLI of version into the test programs' cache, once per
// machine, with test/cluster/build.sh, which pins the version the test module builds.
func crossplaneCLI(t *testing.T, version string) string {
	t.Helper()
	bin := filepath.Join(cachedBinaries(t), "crossplane-cli-"+version)
	if _, err := os.Stat(bin); err == nil {
		return bin
	}
	t.Logf("building the Crossplane CLI %s (once per machine; several minutes on two cores)", version)
	out, err := exec.Command("../cluster/build.sh", "crossplane-cli").CombinedOutput()
	if err != nil {
		t.Fatalf("build.sh crossplane-cli: %v\n%s", err, out)
	}
	if _, err := os.Stat(bin); err != nil {
		t.Fatalf("the README installs the Crossplane CLI %s; test/cluster/build.sh builds another:\n%s", version, out)
	}
	return bin
}

// start runs a background command of the recipe until the test ends, in a process group of its own,
// so that what `go run` starts stops with it.
func start(t *testing.T, dir, command string) {
	t.Helper()
	var log bytes.Buffer
	cmd := exec.Command("bash", "-c", command)
	cmd.Dir, cmd.Stdout, cmd.Stderr = dir, &log, &log
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		t.Fatalf("%s: %v", command, err)
	}
	t.Cleanup(func() {
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGTERM)
		_ = cmd.Wait()
		if t.Failed() {
			t.Logf("%s:\n%s", command, log.String())
		}
	})
}

// developmentTargets are the addresses the recipe's Functions file points the CLI at.
func developmentTargets(t *testing.T, path string) []string {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var targets []string
	for _, doc := range splitYAML(t, data) {
		u := unstructured.Unstructured{Object: doc}
		if target := u.GetAnnotations()["render.crossplane.io/runtime-development-target"]; target != "" {
			targets = append(targets, target)
		}
	}
	if len(targets) == 0 {
		t.Fatalf("%s names no development target", path)
	}
	return targets
}

func waitListening(t *testing.T, address string, timeout time.Duration) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		conn, err := net.DialTimeout("tcp", address, time.Second)
		if err == nil {
			_ = conn.Close()
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("no function listening at %s after %s: %v", address, timeout, err)
		}
		time.Sleep(500 * time.Millisecond)
	}
}

// mdplaneLevel is mdplane's in-process render of the recipe's composite, with the same required
// resources, at the composite's own level.
func mdplaneLevel(t *testing.T, root string, r recipe) pipeline.Output {
	t.Helper()
	composite := filepath.Join(root, r.argument(t, 0))
	files := []string{composite}
	for _, f := range strings.Fields(r.render) {
		if v, ok := strings.CutPrefix(f, "--required-resources="); ok {
			files = append(files, filepath.Join(root, v))
		}
	}
	checker, engine := mdplaneRender(t)
	cluster, deployments := load(t, checker, files)
	if len(deployments) != 1 {
		t.Fatalf("%s: want one ModelDeployment, got %d", composite, len(deployments))
	}
	outputs, err := engine.Render(context.Background(), deployments[0], cluster)
	if err != nil {
		t.Fatal(err)
	}
	for _, o := range outputs {
		if o.Composite != nil && o.Input.GetKind() == "ModelDeployment" {
			return o
		}
	}
	t.Fatalf("mdplane render of %s has no ModelDeployment level", composite)
	return pipeline.Output{}
}

func splitYAML(t *testing.T, data []byte) []map[string]any {
	t.Helper()
	var docs []map[string]any
	for _, part := range regexp.MustCompile(`(?m)^---\s*$`).Split(string(data), -1) {
		m := map[string]any{}
		if err := yaml.Unmarshal([]byte(part), &m); err != nil {
			t.Fatalf("%v in:\n%s", err, part)
		}
		if len(m) > 0 {
			docs = append(docs, m)
		}
	}
	return docs
}
