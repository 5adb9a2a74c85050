// Package mdplane_test pins the stack every later part of the project builds on.
package mdplane_test

import (
	"os"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/mod/modfile"

	// The function SDK, Kueue's API types (only the API package: binaries that do not run Kueue
	// logic must not link its controllers), controller-runtime and protobuf are linked here so that
	// go.mod keeps their exact versions before the packages that use them exist.
	_ "github.com/crossplane/function-sdk-go"
	_ "google.golang.org/protobuf/proto"
	_ "sigs.k8s.io/controller-runtime/pkg/client"
	_ "sigs.k8s.io/kueue/apis/kueue/v1beta2"
)

// TestStackVersions fails when a dependency drifts from the versions the project is built and tested
// against. The module proxy serves exact versions only, so a drift is also a build that may not
// resolve on a fresh machine. go.mod lists the version selected for every module in the build.
func TestStackVersions(t *testing.T) {
	data, err := os.ReadFile("go.mod")
	require.NoError(t, err)
	mod, err := modfile.Parse("go.mod", data, nil)
	require.NoError(t, err)
	selected := map[string]string{}
	for _, r := range mod.Require {
		selected[r.Mod.Path] = r.Mod.Version
	}
	assert.Equal(t, "1.26", mod.Go.Version)
	for module, version := range map[string]string{
		"github.com/crossplane/function-sdk-go":       "v0.7.0",
		"github.com/crossplane/crossplane/apis/v2":    "v2.4.0", // v2.3.0, which the SDK asks for, is not served
		"github.com/crossplane/crossplane-runtime/v2": "v2.4.0",
		"sigs.k8s.io/controller-runtime":              "v0.23.3",
		"sigs.k8s.io/controller-tools":                "v0.20.1",
		"sigs.k8s.io/kueue":                           "v0.17.0",
		"k8s.io/api":                                  "v0.35.3",
		"k8s.io/apimachinery":                         "v0.35.3",
		"k8s.io/client-go":                            "v0.35.3",
		"k8s.io/apiextensions-apiserver":              "v0.35.3",
		"github.com/stretchr/testify":                 "v1.11.1",
		"google.golang.org/protobuf":                  "v1.36.11",
	} {
		assert.Equal(t, version, selected[module], module)
	}
	for _, r := range mod.Replace {
		t.Errorf("go.mod replaces %s: a replace directive is ignored by modules that depend on this one", r.Old.Path)
	}
}
