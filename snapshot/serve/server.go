package serve

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"errors"
	"fmt"
	"math/big"
	"net"
	"net/http"
	"path/filepath"
	"sync/atomic"
	"time"

	"sigs.k8s.io/controller-runtime/pkg/certwatcher"
)

// Server serves a Handler over TLS, asking every client for its certificate (the front proxy's).
type Server struct {
	// Addr is the address it binds.
	Addr string
	// CertDir holds tls.crt and tls.key, read again whenever they change (a rotated certificate is
	// served without a restart); empty means a self-signed certificate made at start, which only an
	// APIService that skips verifying it accepts (docs/decisions/0045-metrics-snapshot.md).
	CertDir string
	// Ready, when set, is closed once CertDir holds the certificate; the server binds after it.
	Ready   <-chan struct{}
	Handler http.Handler

	serving atomic.Bool
}

// Serving is a readiness check: ready once the server listens with its certificate.
func (s *Server) Serving(*http.Request) error {
	if !s.serving.Load() {
		return errors.New("the aggregated API is not serving yet: waiting for its certificate")
	}
	return nil
}

// NeedLeaderElection is false: every replica serves the snapshot.
func (s *Server) NeedLeaderElection() bool { return false }

// Start serves until ctx ends.
func (s *Server) Start(ctx context.Context) error {
	if s.Ready != nil {
		select {
		case <-ctx.Done():
			return nil
		case <-s.Ready:
		}
	}
	tlsConfig := &tls.Config{MinVersion: tls.VersionTLS12, ClientAuth: tls.RequestClientCert}
	if s.CertDir != "" {
		watcher, err := certwatcher.New(filepath.Join(s.CertDir, "tls.crt"), filepath.Join(s.CertDir, "tls.key"))
		if err != nil {
			return fmt.Errorf("--metrics-api-cert-dir=%s: %w", s.CertDir, err)
		}
		go func() { _ = watcher.Start(ctx) }()
		tlsConfig.GetCertificate = watcher.GetCertificate
	} else {
		cert, err := selfSigned()
		if err != nil {
			return err
		}
		tlsConfig.Certificates = []tls.Certificate{cert}
	}
	l, err := net.Listen("tcp", s.Addr)
	if err != nil {
		return fmt.Errorf("--metrics-api-bind-address=%s: %w", s.Addr, err)
	}
	srv := &http.Server{Handler: s.Handler, ReadHeaderTimeout: 10 * time.Second, TLSConfig: tlsConfig}
	s.serving.Store(true)
	defer s.serving.Store(false)
	go func() {
		<-ctx.Done()
		shutdown, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = srv.Shutdown(shutdown)
	}()
	if err := srv.ServeTLS(l, "", ""); err != nil && !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
}

// selfSigned is a serving certificate signed by itself, valid for a year.
func selfSigned() (tls.Certificate, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return tls.Certificate{}, err
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(time.Now().UnixNano()),
		Subject:      pkix.Name{CommonName: "mdplane-metrics-api"},
		DNSNames:     []string{"localhost"},
		IPAddresses:  []net.IP{net.ParseIP("127.0.0.1")},
		NotBefore:    time.Now().Add(-time.Hour),
		NotAfter:     time.Now().Add(365 * 24 * time.Hour),
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return tls.Certificate{}, err
	}
	return tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key}, nil
}
