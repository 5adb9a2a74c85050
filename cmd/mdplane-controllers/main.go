// Command mdplane-controllers runs mdplane's in-cluster parts: today the ModelDeployment admission
// webhooks (validating and mutating), served over TLS from a certificate directory.
package main

import (
	"flag"
	"os"

	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/healthz"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"
	"sigs.k8s.io/controller-runtime/pkg/webhook"

	workerv1 "github.com/mdplane/mdplane/apis/worker/v1"
	"github.com/mdplane/mdplane/webhooks"
)

func main() {
	var certDir, host, metrics, health string
	var port int
	flag.StringVar(&certDir, "webhook-cert-dir", "/tmp/k8s-webhook-server/serving-certs", "directory holding the webhook server's tls.crt and tls.key")
	flag.StringVar(&host, "webhook-host", "", "address the webhook server binds; empty means every interface")
	flag.IntVar(&port, "webhook-port", 9443, "port the webhook server listens on")
	flag.StringVar(&metrics, "metrics-bind-address", ":8080", `address of the metrics endpoint; "0" disables it`)
	flag.StringVar(&health, "health-probe-bind-address", ":8081", "address of the health and readiness probes")
	opts := zap.Options{}
	opts.BindFlags(flag.CommandLine)
	flag.Parse()
	ctrl.SetLogger(zap.New(zap.UseFlagOptions(&opts)))
	log := ctrl.Log.WithName("mdplane-controllers")

	scheme := runtime.NewScheme()
	for _, add := range []func(*runtime.Scheme) error{clientgoscheme.AddToScheme, workerv1.AddToScheme} {
		if err := add(scheme); err != nil {
			log.Error(err, "building the scheme")
			os.Exit(1)
		}
	}
	mgr, err := ctrl.NewManager(ctrl.GetConfigOrDie(), ctrl.Options{
		Scheme:                 scheme,
		Metrics:                metricsserver.Options{BindAddress: metrics},
		HealthProbeBindAddress: health,
		WebhookServer:          webhook.NewServer(webhook.Options{Host: host, Port: port, CertDir: certDir}),
	})
	if err != nil {
		log.Error(err, "creating the manager")
		os.Exit(1)
	}
	// Admission reads InstanceTypes uncached: a stale cache must not decide admission.
	reader := mgr.GetAPIReader()
	mgr.GetWebhookServer().Register(webhooks.ValidatePath, &webhook.Admission{Handler: &webhooks.Validator{Reader: reader}})
	mgr.GetWebhookServer().Register(webhooks.MutatePath, &webhook.Admission{Handler: &webhooks.Defaulter{Reader: reader}})
	if err := mgr.AddHealthzCheck("ping", healthz.Ping); err != nil {
		log.Error(err, "adding the health check")
		os.Exit(1)
	}
	if err := mgr.AddReadyzCheck("webhooks", mgr.GetWebhookServer().StartedChecker()); err != nil {
		log.Error(err, "adding the readiness check")
		os.Exit(1)
	}
	if err := mgr.Start(ctrl.SetupSignalHandler()); err != nil {
		log.Error(err, "running the manager")
		os.Exit(1)
	}
}
