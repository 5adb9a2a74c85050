// Package render checks `mdplane render` against Crossplane's own composition engine: the core
// binary's `crossplane internal render`, built from the pinned Crossplane release. It belongs to the
// test module, so the Crossplane core module stays out of the product's dependency graph.
package render

import (
	"bytes"
	"context"
	"fmt"
	"io/fs"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	renderv1alpha1 "github.com/crossplane/crossplane/v2/proto/render/v1alpha1"
	fnv1 "github.com/crossplane/function-sdk-go/proto/v1"
	"github.com/google/go-cmp/cmp"
	"google.golang.org/grpc"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/structpb"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/yaml"

	"github.com/mdplane/mdplane/functions"
	"github.com/mdplane/mdplane/internal/admission"
	"github.com/mdplane/mdplane/internal/pipeline"
	"github.com/mdplane/mdplane/internal/schemacheck"
	manifests "github.com/mdplane/mdplane/package"
)

// crossplaneVersion is the Crossplane release whose engine is the oracle; go.mod pins the same.
const crossplaneVersion = "v2.4.0"

// crossplaneBinary returns the cached core binary, building it on first use: one build per version
// and machine, outside the repository.
func crossplaneBinary(t *testing.T) string {
	t.Helper()
	bin := filepath.Join(cachedBinaries(t), "crossplane-"+crossplaneVersion)
	if _, err := os.Stat(bin); err == nil {
		return bin
	}
	t.Logf("building crossplane %s into %s (once per machine; about ten minutes on two cores)", crossplaneVersion, bin)
	start := time.Now()
	// A private temporary name: the e2e stack's build.sh may build the same binary at the same time.
	tmp := fmt.Sprintf("%s.tmp.%d", bin, os.Getpid())
	cmd := exec.Command("go", "build", "-trimpath", "-ldflags=-s -w", "-o", tmp, "github.com/crossplane/crossplane/v2/cmd/crossplane")
	cmd.Stdout, cmd.Stderr = os.Stdout, os.Stderr
	if err := os.MkdirAll(filepath.Dir(bin), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := cmd.Run(); err != nil {
		t.Fatalf("building crossplane: %v", err)
	}
	if err := os.Rename(tmp, bin); err != nil {
		t.Fatal(err)
	}
	t.Logf("built crossplane in %s", time.Since(start).Round(time.Second))
	return bin
}

// cachedBinaries is where the programs the tests run are built, once per version and machine, as
// test/cluster/build.sh builds them.
func cachedBinaries(t *testing.T) string {
	t.Helper()
	cache := os.Getenv("MDPLANE_CACHE")
	if cache == "" {
		home, err := os.UserCacheDir()
		if err != nil {
			t.Fatal(err)
		}
		cache = filepath.Join(home, "mdplane")
	}
	return filepath.Join(cache, "bin")
}

// serve runs a function on a loopback port until the test ends; the engine dials it insecurely.
func serve(t *testing.T, fn fnv1.FunctionRunnerServiceServer) string {
	t.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := grpc.NewServer()
	fnv1.RegisterFunctionRunnerServiceServer(srv, fn)
	go func() { _ = srv.Serve(lis) }()
	t.Cleanup(srv.Stop)
	return lis.Addr().String()
}

func readPackage(t *testing.T, dir, name string) *structpb.Struct {
	t.Helper()
	raw, err := fs.ReadFile(manifests.FS, dir+"/"+name)
	if err != nil {
		t.Fatal(err)
	}
	return structOf(t, raw)
}

func structOf(t *testing.T, y []byte) *structpb.Struct {
	t.Helper()
	m := map[string]any{}
	if err := yaml.Unmarshal(y, &m); err != nil {
		t.Fatal(err)
	}
	s, err := structpb.NewStruct(m)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func objStruct(t *testing.T, u *unstructured.Unstructured) *structpb.Struct {
	t.Helper()
	s, err := structpb.NewStruct(u.Object)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// packageFile is the generated file of a composite kind: <group>_<plural>.yaml.
func packageFile(u *unstructured.Unstructured) string {
	group := strings.SplitN(u.GetAPIVersion(), "/", 2)[0]
	return group + "_" + strings.ToLower(u.GetKind()) + "s.yaml"
}

// TestRenderMatchesCrossplane renders every example and every golden case of render-roles with
// mdplane's in-process pipeline, then each composite of it, one level at a time, with Crossplane's
// engine calling the same function over gRPC: the composed resources and the status must be the same.
func TestRenderMatchesCrossplane(t *testing.T) {
	bin := crossplaneBinary(t)
	// Every function the Compositions call, served over gRPC for Crossplane's engine to dial.
	var functionInputs []*renderv1alpha1.FunctionInput
	for name, fn := range functions.BuiltIn() {
		functionInputs = append(functionInputs, &renderv1alpha1.FunctionInput{Name: name, Address: serve(t, fn)})
	}

	checker, engine := mdplaneRender(t)
	// The examples, and every golden case of the render-roles function with its cluster objects.
	sets := [][]string{}
	examples, _ := filepath.Glob("../../examples/*.yaml")
	sets = append(sets, examples)
	cases, _ := filepath.Glob("../../functions/testdata/cases/*.yaml")
	for _, c := range cases {
		sets = append(sets, []string{c, "../../functions/testdata/cluster.yaml"})
	}

	levels, rendered := 0, 0
	for _, files := range sets {
		cluster, deployments := load(t, checker, files)
		for _, md := range deployments {
			levels += compareDeployment(t, bin, functionInputs, engine, md, cluster)
			rendered++
		}
	}
	t.Logf("compared %d composites of %d deployments", levels, rendered)
}

// mdplaneRender is what `mdplane render` judges and renders with: the package's schemas and the
// Compositions run in-process with the built-in functions.
func mdplaneRender(t *testing.T) (*schemacheck.Checker, *pipeline.Engine) {
	t.Helper()
	checker, err := schemacheck.ForPackage(manifests.FS)
	if err != nil {
		t.Fatal(err)
	}
	engine, err := functions.Engine()
	if err != nil {
		t.Fatal(err)
	}
	return checker, engine
}

// load reads manifest files as the API server would store them once admitted, with the status
// mdplane-controllers writes before a render reads it (a Binding's domain claim).
func load(t *testing.T, checker *schemacheck.Checker, files []string) (cluster, deployments []*unstructured.Unstructured) {
	t.Helper()
	var docs []schemacheck.Document
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		more, err := schemacheck.SplitDocuments(f, data)
		if err != nil {
			t.Fatal(err)
		}
		docs = append(docs, more...)
	}
	cluster, refusals, err := admission.Judge(checker, docs, nil)
	if err != nil || len(refusals) > 0 {
		t.Fatalf("admitting %v: %v %v", files, err, refusals)
	}
	for _, obj := range cluster {
		if obj.GetKind() == "ModelDeployment" {
			deployments = append(deployments, obj)
		}
	}
	if len(deployments) == 0 {
		t.Fatalf("no ModelDeployment in %v", files)
	}
	return cluster, deployments
}

// compareDeployment renders md with mdplane, then every composite of it with Crossplane, and returns
// how many composites it compared.
func compareDeployment(t *testing.T, bin string, functions []*renderv1alpha1.FunctionInput, engine *pipeline.Engine, md *unstructured.Unstructured, cluster []*unstructured.Unstructured) int {
	t.Helper()
	outputs, err := engine.Render(context.Background(), md, cluster)
	if err != nil {
		t.Fatalf("mdplane render of %s: %v", md.GetName(), err)
	}
	// What the composites above a level compose is on the "cluster" when that level renders, as it
	// would be; Pods are not, since a fresh deployment has none when its slots are filled.
	required := append([]*unstructured.Unstructured(nil), cluster...)
	for _, o := range outputs {
		for _, c := range o.Composed {
			if c.Object.GetKind() != "Pod" {
				required = append(required, c.Object)
			}
		}
	}
	levels := 0
	for _, o := range outputs {
		if o.Composite == nil {
			continue // a ModelRole or ModelReplica has no Composition: what is below it comes from the materializers, as the controllers create it
		}
		levels++
		t.Run(fmt.Sprintf("%s/%s %s", md.GetName(), o.Input.GetKind(), o.Input.GetName()), func(t *testing.T) {
			compareLevel(t, bin, functions, o, required)
		})
	}
	return levels
}

func compareLevel(t *testing.T, bin string, functions []*renderv1alpha1.FunctionInput, ours pipeline.Output, required []*unstructured.Unstructured) {
	in := &renderv1alpha1.CompositeInput{
		CompositeResource:           objStruct(t, ours.Input),
		Composition:                 readPackage(t, "compositions", packageFile(ours.Input)),
		CompositeResourceDefinition: readPackage(t, "xrds", packageFile(ours.Input)),
		Functions:                   functions,
	}
	for _, r := range required {
		in.RequiredResources = append(in.RequiredResources, objStruct(t, r))
	}
	req, err := proto.Marshal(&renderv1alpha1.RenderRequest{Input: &renderv1alpha1.RenderRequest_Composite{Composite: in}})
	if err != nil {
		t.Fatal(err)
	}
	var stdout, stderr bytes.Buffer
	cmd := exec.Command(bin, "internal", "render")
	cmd.Stdin, cmd.Stdout, cmd.Stderr = bytes.NewReader(req), &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("crossplane internal render: %v\n%s", err, stderr.String())
	}
	rsp := &renderv1alpha1.RenderResponse{}
	if err := proto.Unmarshal(stdout.Bytes(), rsp); err != nil {
		t.Fatal(err)
	}
	out := rsp.GetComposite()
	var composed []map[string]any
	for _, c := range out.GetComposedResources() {
		composed = append(composed, c.AsMap())
	}
	if os.Getenv("MDPLANE_RENDER_DEBUG") != "" {
		y, _ := yaml.Marshal(out.GetCompositeResource().AsMap()["status"])
		t.Logf("crossplane status:\n%s", y)
		for _, e := range out.GetEvents() {
			t.Logf("event %s %s: %s", e.GetType(), e.GetReason(), e.GetMessage())
		}
	}
	for _, e := range out.GetEvents() {
		if e.GetType() == "Warning" {
			t.Errorf("crossplane reported a warning: %s: %s", e.GetReason(), e.GetMessage())
		}
	}
	compareOutput(t, ours, out.GetCompositeResource().AsMap(), composed)
}

// compareOutput holds Crossplane's render of a composite level (the composite and what it composed)
// against mdplane's: the same composed resources, field for field, and the same status.
func compareOutput(t *testing.T, ours pipeline.Output, xr map[string]any, composedTheirs []map[string]any) {
	t.Helper()
	theirs := map[string]map[string]any{}
	for _, m := range composedTheirs {
		theirs[compositionResourceName(m)] = normalize(m)
	}
	composed := map[string]map[string]any{}
	for _, c := range ours.Composed {
		composed[c.Name] = normalize(c.Object.DeepCopy().Object)
	}
	if diff := cmp.Diff(keys(composed), keys(theirs)); diff != "" {
		t.Fatalf("composed resources differ (-mdplane +crossplane):\n%s", diff)
	}
	for name := range composed {
		if diff := cmp.Diff(composed[name], theirs[name]); diff != "" {
			t.Errorf("%s differs (-mdplane +crossplane):\n%s", name, diff)
		}
	}

	theirStatus, _ := xr["status"].(map[string]any)
	if !hasCondition(theirStatus, "Synced", "True") {
		t.Errorf("crossplane did not reconcile the composite: status %v", theirStatus)
	}
	myStatus, _ := ours.Composite.Object["status"].(map[string]any)
	mine := jsonNumbers(myStatus)
	myConditions, _ := mine["conditions"].([]any)
	delete(mine, "conditions")
	for _, c := range myConditions {
		if !hasCondition(theirStatus, c.(map[string]any)["type"].(string), c.(map[string]any)["status"].(string)) {
			t.Errorf("crossplane does not report condition %v", c)
		}
	}
	for k, v := range mine {
		if diff := cmp.Diff(v, jsonNumbers(theirStatus)[k]); diff != "" {
			t.Errorf("status.%s differs (-mdplane +crossplane):\n%s", k, diff)
		}
	}
}

func hasCondition(status map[string]any, typ, value string) bool {
	conditions, _ := status["conditions"].([]any)
	for _, c := range conditions {
		if m, ok := c.(map[string]any); ok && m["type"] == typ && m["status"] == value {
			return true
		}
	}
	return false
}

func compositionResourceName(m map[string]any) string {
	md, _ := m["metadata"].(map[string]any)
	a, _ := md["annotations"].(map[string]any)
	name, _ := a[pipeline.AnnotationCompositionResourceName].(string)
	return name
}

// normalize drops what only a cluster assigns: the owner reference (it needs the composite's UID)
// and a name the API server generates from generateName.
func normalize(m map[string]any) map[string]any {
	m = jsonNumbers(m)
	md, _ := m["metadata"].(map[string]any)
	delete(md, "ownerReferences")
	if _, generated := md["generateName"]; generated {
		delete(md, "name")
	}
	return m
}

// jsonNumbers makes numbers comparable whichever side decoded them: every number becomes float64.
func jsonNumbers(m map[string]any) map[string]any {
	if m == nil {
		return nil
	}
	s, err := structpb.NewStruct(m)
	if err != nil {
		panic(err)
	}
	return s.AsMap()
}

func keys(m map[string]map[string]any) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}
