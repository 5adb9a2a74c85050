package main

import (
	"crypto/x509"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
	"golang.org/x/crypto/x509roots/fallback/bundle"
)

// rootsChildEnv marks the child process that runs with no system roots at all.
const rootsChildEnv = "MDPLANE_TEST_NO_SYSTEM_ROOTS"

// huggingFaceAnchor is the root huggingface.co's certificate chain ends at.
const huggingFaceAnchor = "CN=Amazon Root CA 1,O=Amazon,C=US"

// Go reads the system roots once per process, so the check runs in a child started with the
// certificate file and directory pointed at nothing, as in the FROM-scratch image.
func TestWithoutSystemRootsTheControllersStillTrustTheHubsRoots(t *testing.T) {
	if os.Getenv(rootsChildEnv) == "1" {
		verifyAsTheTransportDoes(t)
		return
	}
	empty := t.TempDir()
	child := exec.Command(os.Args[0], "-test.run=^TestWithoutSystemRootsTheControllersStillTrustTheHubsRoots$", "-test.v")
	child.Env = append(os.Environ(), rootsChildEnv+"=1",
		"SSL_CERT_FILE="+filepath.Join(empty, "none.crt"), "SSL_CERT_DIR="+empty)
	out, err := child.CombinedOutput()
	require.NoError(t, err, "with no system roots:\n%s", out)
	require.Contains(t, string(out), "--- PASS", "the child ran the check")
}

// verifyAsTheTransportDoes verifies the hub's anchor against the pool a tls.Config without RootCAs
// uses: the system pool.
func verifyAsTheTransportDoes(t *testing.T) {
	anchor := certificateNamed(t, huggingFaceAnchor)
	_, err := anchor.Verify(x509.VerifyOptions{})
	require.NoError(t, err, "the system pool does not trust %s", huggingFaceAnchor)
}

func certificateNamed(t *testing.T, subject string) *x509.Certificate {
	t.Helper()
	for root := range bundle.Roots() {
		cert, err := x509.ParseCertificate(root.Certificate)
		require.NoError(t, err)
		if cert.Subject.String() == subject {
			return cert
		}
	}
	t.Fatalf("no root %s in the fallback bundle", subject)
	return nil
}
