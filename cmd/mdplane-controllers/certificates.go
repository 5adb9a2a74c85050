package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/open-policy-agent/cert-controller/pkg/rotator"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/manager"
)

// webhookConfiguration is the name of both the validating and the mutating webhook configuration
// (package/webhooks/manifests.yaml); the certificate rotator keeps their CA bundles.
const webhookConfiguration = "mdplane"

// certificates says where a serving certificate (the webhooks' or the aggregated API's) comes from:
// files someone else puts into the certificate directory (cert-manager, a mounted Secret), or, with
// a Secret name, a CA and certificate this process issues, stores in that Secret, renews, and
// injects into the webhook configurations or APIServices it is for (the way Kueue and Gatekeeper
// manage theirs). The Secret and the Service live in the process's own namespace (--namespace).
// With a Secret, the process also writes the Secret's certificate into the directory itself, so a
// new replica serves as soon as the Secret is complete rather than at the kubelet's next sync of a
// projected volume.
type certificates struct {
	secret, namespace, service string
	extraNames                 string
	// caName names the issued CA and the rotator; secretFlag is the flag that names the Secret.
	caName, secretFlag string
	// injectInto are the objects whose caBundle the issued CA is written into.
	injectInto []rotator.WebhookInfo
}

// webhookCertificates is the webhooks' certificate, its CA in both webhook configurations.
func webhookCertificates() certificates {
	return certificates{caName: "mdplane-webhook-ca", secretFlag: "--webhook-cert-secret", injectInto: []rotator.WebhookInfo{
		{Name: webhookConfiguration, Type: rotator.Validating},
		{Name: webhookConfiguration, Type: rotator.Mutating},
	}}
}

func (c *certificates) bindFlags(fs *flag.FlagSet) {
	fs.StringVar(&c.secret, "webhook-cert-secret", "", "Secret in --namespace holding the webhook CA and serving certificate this process issues and rotates; empty means the certificate directory is provided")
	fs.StringVar(&c.service, "webhook-service", "mdplane-webhook", "name of the Service the API server calls the webhooks through; the certificate is issued for <service>.<namespace>.svc")
	fs.StringVar(&c.extraNames, "webhook-extra-dns-names", "", "comma-separated further DNS names for the issued certificate")
}

// manage arranges the serving certificate in certDir and returns a channel closed once it is there.
func (c *certificates) manage(mgr manager.Manager, certDir string) (<-chan struct{}, error) {
	ready := make(chan struct{})
	if c.secret == "" {
		close(ready)
		return ready, nil
	}
	if c.namespace == "" {
		return nil, fmt.Errorf("%s=%s needs --namespace (or $POD_NAMESPACE): the namespace of the Secret and the Service", c.secretFlag, c.secret)
	}
	var extra []string
	for _, n := range strings.Split(c.extraNames, ",") {
		if n = strings.TrimSpace(n); n != "" {
			extra = append(extra, n)
		}
	}
	key := types.NamespacedName{Namespace: c.namespace, Name: c.secret}
	if err := mgr.Add(&secretFiles{reader: mgr.GetAPIReader(), key: key, dir: certDir}); err != nil {
		return nil, fmt.Errorf("adding the certificate writer: %w", err)
	}
	return ready, rotator.AddRotator(mgr, &rotator.CertRotator{
		SecretKey:      key,
		CertDir:        certDir,
		CAName:         c.caName,
		ControllerName: c.caName + "-rotator",
		CAOrganization: "mdplane",
		DNSName:        fmt.Sprintf("%s.%s.svc", c.service, c.namespace),
		ExtraDNSNames:  extra,
		IsReady:        ready,
		Webhooks:       c.injectInto,
	})
}

// secretFiles keeps the certificate Secret's keys as files in dir, on every replica (leader or not):
// once a second until the Secret holds a certificate, then every secretFilesResync.
type secretFiles struct {
	reader client.Reader
	key    types.NamespacedName
	dir    string
}

// secretFilesResync is how often a replica reads the Secret again once it wrote it: a rotated
// certificate reaches the files within it, well inside the rotator's look-ahead.
const secretFilesResync = 10 * time.Second

// certificateKeys are the Secret's keys the webhook server and the rotator read from the directory.
var certificateKeys = []string{"tls.crt", "tls.key", "ca.crt"}

func (w *secretFiles) NeedLeaderElection() bool { return false }

func (w *secretFiles) Start(ctx context.Context) error {
	written, failing := "", ""
	for {
		wait := time.Second
		secret := &corev1.Secret{}
		err := w.reader.Get(ctx, w.key, secret)
		// Not found is the normal wait for the rotator's first certificate; anything else (a
		// missing right, an unreachable API server) is logged once while it lasts.
		if err != nil && !apierrors.IsNotFound(err) && err.Error() != failing {
			log.FromContext(ctx).Error(err, "reading the certificate Secret", "secret", w.key.String())
		}
		failing = ""
		if err != nil {
			failing = err.Error()
		}
		if err == nil && complete(secret) {
			if secret.ResourceVersion == written {
				wait = secretFilesResync
			} else if err := w.write(secret); err != nil {
				log.FromContext(ctx).Error(err, "writing the certificate", "dir", w.dir)
			} else {
				written, wait = secret.ResourceVersion, secretFilesResync
			}
		}
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(wait):
		}
	}
}

func complete(s *corev1.Secret) bool {
	for _, k := range certificateKeys {
		if len(s.Data[k]) == 0 {
			return false
		}
	}
	return true
}

// write replaces each file atomically, so the server never reads half a certificate. Between the
// certificate's rename and the key's, the two do not match: the server keeps the pair it has until
// the key lands and it reads both again.
func (w *secretFiles) write(s *corev1.Secret) error {
	if err := os.MkdirAll(w.dir, 0o700); err != nil {
		return err
	}
	for _, k := range certificateKeys {
		tmp := filepath.Join(w.dir, "."+k)
		if err := os.WriteFile(tmp, s.Data[k], 0o600); err != nil {
			return err
		}
		if err := os.Rename(tmp, filepath.Join(w.dir, k)); err != nil {
			return err
		}
	}
	return nil
}
