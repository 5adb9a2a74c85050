package packaging_test

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"sigs.k8s.io/yaml"

	"github.com/mdplane/mdplane/internal/packaging"
)

// The kustomize base that installs the cluster side (docs/install.md).
func TestTheInstallBaseCarriesEveryCRDAndTheReleaseImage(t *testing.T) {
	raw, err := os.ReadFile("../../package/kustomization.yaml")
	require.NoError(t, err)
	var k struct {
		Resources []string `json:"resources"`
		Images    []struct {
			Name   string `json:"name"`
			NewTag string `json:"newTag"`
		} `json:"images"`
	}
	require.NoError(t, yaml.Unmarshal(raw, &k))
	crds, err := filepath.Glob("../../package/crds/*.yaml")
	require.NoError(t, err)
	require.NotEmpty(t, crds)
	for _, crd := range crds {
		assert.Contains(t, k.Resources, "crds/"+filepath.Base(crd), "a CRD the install base leaves out")
	}
	for _, r := range k.Resources {
		assert.FileExists(t, filepath.Join("..", "..", "package", r))
	}
	require.Len(t, k.Images, 1)
	assert.Equal(t, packaging.Registry+"/mdplane-controllers", k.Images[0].Name)
	assert.Equal(t, packaging.Version, k.Images[0].NewTag, "the base installs the release the repository builds")
}
