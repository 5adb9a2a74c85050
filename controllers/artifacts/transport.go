package artifacts

import (
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"net/http"
	"net/url"
	"sort"

	"golang.org/x/net/http/httpproxy"
)

// hubTransport is the transport the hub calls go through: the Setting model-artifact-https-proxy
// (with model-artifact-no-proxy) when set, else the controller's own proxy environment; and the
// system roots plus the certificates of the model-artifact-ca-bundle ConfigMap, for a hub mirror
// behind a private CA. bundle is that ConfigMap's data: every value is read as PEM certificates,
// so the key is the platform's choice (ca.crt, ca-bundle.crt, ...).
func hubTransport(httpsProxy, noProxy string, bundle map[string]string) (*http.Transport, error) {
	t := http.DefaultTransport.(*http.Transport).Clone()
	if httpsProxy != "" {
		proxy := (&httpproxy.Config{HTTPSProxy: httpsProxy, HTTPProxy: httpsProxy, NoProxy: noProxy}).ProxyFunc()
		t.Proxy = func(r *http.Request) (*url.URL, error) { return proxy(r.URL) }
	}
	if len(bundle) == 0 {
		return t, nil
	}
	roots, err := x509.SystemCertPool()
	if err != nil || roots == nil {
		roots = x509.NewCertPool()
	}
	keys := make([]string, 0, len(bundle))
	for k := range bundle {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	added := 0
	for _, k := range keys {
		if roots.AppendCertsFromPEM([]byte(bundle[k])) {
			added++
		}
	}
	if added == 0 {
		return nil, fmt.Errorf("no PEM certificate in any of its keys (%v)", keys)
	}
	t.TLSClientConfig = &tls.Config{RootCAs: roots, MinVersion: tls.VersionTLS12}
	return t, nil
}
