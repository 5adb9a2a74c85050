package main

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
)

// TestTheWebhooksWriteTheirCertificateThemselves: a replica writes the certificate Secret's keys into
// its directory as soon as the Secret holds all three, without waiting for a kubelet to project it;
// a Secret still being filled writes nothing.
func TestTheWebhooksWriteTheirCertificateThemselves(t *testing.T) {
	for _, row := range []struct {
		rule  string
		data  map[string][]byte
		wrote bool
	}{
		{"a complete Secret is written", map[string][]byte{"tls.crt": []byte("crt"), "tls.key": []byte("key"), "ca.crt": []byte("ca")}, true},
		{"a Secret without its CA is not", map[string][]byte{"tls.crt": []byte("crt"), "tls.key": []byte("key")}, false},
	} {
		t.Run(row.rule, func(t *testing.T) {
			secret := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "mdplane-system", Name: "mdplane-webhook-cert"}, Data: row.data}
			dir := filepath.Join(t.TempDir(), "certs")
			w := &secretFiles{reader: fake.NewClientBuilder().WithObjects(secret).Build(), key: types.NamespacedName{Namespace: "mdplane-system", Name: "mdplane-webhook-cert"}, dir: dir}
			ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
			defer cancel()
			if err := w.Start(ctx); err != nil {
				t.Fatal(err)
			}
			for key, want := range row.data {
				got, err := os.ReadFile(filepath.Join(dir, key))
				if row.wrote && !bytes.Equal(got, want) {
					t.Errorf("%s is %q (%v), want %q", key, got, err, want)
				}
				if !row.wrote && err == nil {
					t.Errorf("%s was written from an incomplete Secret", key)
				}
			}
		})
	}
}
