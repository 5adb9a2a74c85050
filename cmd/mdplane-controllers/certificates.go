package main

import (
	"flag"
	"fmt"
	"strings"

	"github.com/open-policy-agent/cert-controller/pkg/rotator"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/manager"
)

// webhookConfiguration is the name of both the validating and the mutating webhook configuration
// (package/webhooks/manifests.yaml); the certificate rotator keeps their CA bundles.
const webhookConfiguration = "mdplane"

// certificates says where the webhook serving certificate comes from: files someone else puts into
// the certificate directory (cert-manager, a mounted Secret), or, with a Secret name, a CA and
// certificate this process issues, stores in that Secret, renews, and injects into the webhook
// configurations (the way Kueue and Gatekeeper manage theirs). The Secret and the Service live in
// the process's own namespace (--namespace).
type certificates struct {
	secret, namespace, service string
	extraNames                 string
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
		return nil, fmt.Errorf("--webhook-cert-secret=%s needs --namespace (or $POD_NAMESPACE): the namespace of the Secret and the webhook Service", c.secret)
	}
	var extra []string
	for _, n := range strings.Split(c.extraNames, ",") {
		if n = strings.TrimSpace(n); n != "" {
			extra = append(extra, n)
		}
	}
	return ready, rotator.AddRotator(mgr, &rotator.CertRotator{
		SecretKey:      types.NamespacedName{Namespace: c.namespace, Name: c.secret},
		CertDir:        certDir,
		CAName:         "mdplane-webhook-ca",
		CAOrganization: "mdplane",
		DNSName:        fmt.Sprintf("%s.%s.svc", c.service, c.namespace),
		ExtraDNSNames:  extra,
		IsReady:        ready,
		Webhooks: []rotator.WebhookInfo{
			{Name: webhookConfiguration, Type: rotator.Validating},
			{Name: webhookConfiguration, Type: rotator.Mutating},
		},
	})
}
