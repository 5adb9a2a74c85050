package packaging_test

import (
	"crypto/sha256"
	"encoding/hex"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"sigs.k8s.io/yaml"
)

// apacheLicense20 is the SHA-256 of the Apache License 2.0 as the Apache Software Foundation
// publishes it (https://www.apache.org/licenses/LICENSE-2.0.txt).
const apacheLicense20 = "cfc7749b96f63bd31c3c42b5c471bf756814053e847c10f3eb003417bc523d30"

// Every package's metadata names the license the repository's LICENSE file holds.
func TestThePackagesClaimTheLicenseTheRepositoryCarries(t *testing.T) {
	text, err := os.ReadFile("../../LICENSE")
	require.NoError(t, err)
	sum := sha256.Sum256(text)
	assert.Equal(t, apacheLicense20, hex.EncodeToString(sum[:]), "LICENSE is not the Apache License 2.0 text verbatim")

	metas, err := filepath.Glob("../../package/*/crossplane.yaml")
	require.NoError(t, err)
	more, err := filepath.Glob("../../package/*/*/crossplane.yaml")
	require.NoError(t, err)
	metas = append(metas, more...)
	require.Len(t, metas, 3, "the Configuration and two Functions")
	for _, path := range metas {
		raw, err := os.ReadFile(path)
		require.NoError(t, err)
		var meta struct {
			Metadata struct {
				Annotations map[string]string `json:"annotations"`
			} `json:"metadata"`
		}
		require.NoError(t, yaml.Unmarshal(raw, &meta))
		assert.Equal(t, "Apache-2.0", meta.Metadata.Annotations["meta.crossplane.io/license"], path)
	}
}
