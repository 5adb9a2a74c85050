package artifacts

import (
	"encoding/pem"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestHubTransportFollowsTheProxySettings(t *testing.T) {
	tr, err := hubTransport("http://proxy.corp:3128", "mirror.corp", nil)
	require.NoError(t, err)
	proxyOf := func(target string) string {
		req, _ := http.NewRequest(http.MethodGet, target, nil)
		u, err := tr.Proxy(req)
		require.NoError(t, err)
		if u == nil {
			return ""
		}
		return u.String()
	}
	assert.Equal(t, "http://proxy.corp:3128", proxyOf("https://huggingface.co/api/models/x"), "a hub call goes through model-artifact-https-proxy")
	assert.Empty(t, proxyOf("https://mirror.corp/api/models/x"), "model-artifact-no-proxy names the hosts reached directly")
}

func TestHubTransportTrustsTheCABundle(t *testing.T) {
	hub := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(http.StatusNoContent) }))
	defer hub.Close()
	ca := string(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: hub.Certificate().Raw}))
	get := func(bundle map[string]string) error {
		tr, err := hubTransport("", "", bundle)
		require.NoError(t, err)
		rsp, err := (&http.Client{Transport: tr}).Get(hub.URL)
		if err == nil {
			_ = rsp.Body.Close()
		}
		return err
	}
	assert.Error(t, get(nil), "a private CA is not trusted without the bundle")
	assert.NoError(t, get(map[string]string{"ca-bundle.crt": ca}), "the bundle's certificates are trusted, under any key")

	_, err := hubTransport("", "", map[string]string{"ca.crt": "not a certificate"})
	assert.ErrorContains(t, err, "no PEM certificate in any of its keys ([ca.crt])")
}
