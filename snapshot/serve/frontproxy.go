package serve

import (
	"context"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// AuthenticationConfigMap is where the kube-apiserver publishes how its front proxy authenticates.
var AuthenticationConfigMap = types.NamespacedName{Namespace: "kube-system", Name: "extension-apiserver-authentication"}

// refreshAfter is how long a read of the ConfigMap is used before it is read again.
const refreshAfter = time.Minute

// User is who the front proxy says is asking.
type User struct {
	Name   string
	Groups []string
	Extra  map[string][]string
}

// requestHeader is the front proxy's configuration: its client CA, the names its certificate may
// carry, and the headers it names the user in.
type requestHeader struct {
	roots                  *x509.CertPool
	allowedNames           []string
	userHeaders, groupHdrs []string
	extraPrefixes          []string
	readAt                 time.Time
}

// FrontProxy authenticates requests the kube-apiserver proxies.
type FrontProxy struct {
	Reader client.Reader
	mu     sync.Mutex
	config *requestHeader
}

// Authenticate verifies the request's client certificate against the requestheader CA and allowed
// names, and returns the user its headers name.
func (f *FrontProxy) Authenticate(ctx context.Context, r *http.Request) (User, error) {
	cfg, err := f.read(ctx)
	if err != nil {
		return User{}, err
	}
	if r.TLS == nil || len(r.TLS.PeerCertificates) == 0 {
		return User{}, errors.New("no client certificate: only the kube-apiserver's front proxy may call this server")
	}
	leaf := r.TLS.PeerCertificates[0]
	inter := x509.NewCertPool()
	for _, c := range r.TLS.PeerCertificates[1:] {
		inter.AddCert(c)
	}
	if _, err := leaf.Verify(x509.VerifyOptions{Roots: cfg.roots, Intermediates: inter, KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}}); err != nil {
		return User{}, fmt.Errorf("the client certificate is not signed by the requestheader CA: %w", err)
	}
	if len(cfg.allowedNames) > 0 && !slices.Contains(cfg.allowedNames, leaf.Subject.CommonName) {
		return User{}, fmt.Errorf("the client certificate's common name %q is not among the requestheader allowed names", leaf.Subject.CommonName)
	}
	u := User{Name: first(r.Header, cfg.userHeaders), Extra: map[string][]string{}}
	for _, h := range cfg.groupHdrs {
		u.Groups = append(u.Groups, r.Header.Values(h)...)
	}
	for name, values := range r.Header {
		for _, p := range cfg.extraPrefixes {
			if key, ok := strings.CutPrefix(strings.ToLower(name), strings.ToLower(p)); ok && key != "" {
				u.Extra[key] = append(u.Extra[key], values...)
			}
		}
	}
	return u, nil
}

func first(h http.Header, names []string) string {
	for _, n := range names {
		if v := h.Get(n); v != "" {
			return v
		}
	}
	return ""
}

// read is the front proxy's configuration, read again after refreshAfter.
func (f *FrontProxy) read(ctx context.Context) (*requestHeader, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.config != nil && time.Since(f.config.readAt) < refreshAfter {
		return f.config, nil
	}
	var cm corev1.ConfigMap
	if err := f.Reader.Get(ctx, AuthenticationConfigMap, &cm); err != nil {
		return nil, fmt.Errorf("reading %s: %w", AuthenticationConfigMap, err)
	}
	roots := x509.NewCertPool()
	if !roots.AppendCertsFromPEM([]byte(cm.Data["requestheader-client-ca-file"])) {
		return nil, fmt.Errorf("%s has no requestheader-client-ca-file: start the kube-apiserver with --requestheader-client-ca-file", AuthenticationConfigMap)
	}
	cfg := &requestHeader{roots: roots, readAt: time.Now()}
	for key, into := range map[string]*[]string{
		"requestheader-allowed-names": &cfg.allowedNames, "requestheader-username-headers": &cfg.userHeaders,
		"requestheader-group-headers": &cfg.groupHdrs, "requestheader-extra-headers-prefix": &cfg.extraPrefixes,
	} {
		if raw := cm.Data[key]; raw != "" {
			if err := json.Unmarshal([]byte(raw), into); err != nil {
				return nil, fmt.Errorf("%s: %s is not a JSON list: %w", AuthenticationConfigMap, key, err)
			}
		}
	}
	if len(cfg.userHeaders) == 0 {
		cfg.userHeaders = []string{"X-Remote-User"}
	}
	if len(cfg.groupHdrs) == 0 {
		cfg.groupHdrs = []string{"X-Remote-Group"}
	}
	if len(cfg.extraPrefixes) == 0 {
		cfg.extraPrefixes = []string{"X-Remote-Extra-"}
	}
	f.config = cfg
	return cfg, nil
}
