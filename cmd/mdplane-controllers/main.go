// Command mdplane-controllers runs mdplane's in-cluster parts: the admission webhooks of
// ModelDeployments, KVCacheBackends and ModelArtifacts (validating and mutating, served over TLS from
// a certificate directory, optionally issued and rotated by the process itself) and the controllers:
// the joint admission check that holds a deployment's replica groups until the whole set has
// reserved quota, the Kueue queues behind each InstanceType, the rollout, the ModelArtifact
// resolver and the KVCachePool endpoints; and the aggregated API (the metrics snapshot, the roles'
// scale, custom metrics). An installation runs the webhooks, the controllers and the API as three
// Deployments with their own ServiceAccounts (--enable-controllers=false, --enable-webhooks=false,
// both false with --metrics-api-bind-address).
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"net/http"
	"os"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/utils/clock"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	ctrlmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"
	kueue "sigs.k8s.io/kueue/apis/kueue/v1beta2"

	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/healthz"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"
	"sigs.k8s.io/controller-runtime/pkg/webhook"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	"github.com/mdplane/mdplane/apis/composite/v1alpha1"
	"github.com/mdplane/mdplane/apis/naming"
	workerv1 "github.com/mdplane/mdplane/apis/worker/v1"
	"github.com/mdplane/mdplane/controllers/admissioncheck"
	"github.com/mdplane/mdplane/controllers/artifacts"
	"github.com/mdplane/mdplane/controllers/budgets"
	"github.com/mdplane/mdplane/controllers/elastic"
	"github.com/mdplane/mdplane/controllers/expectations"
	"github.com/mdplane/mdplane/controllers/index"
	"github.com/mdplane/mdplane/controllers/inventory"
	"github.com/mdplane/mdplane/controllers/kvcachepools"
	"github.com/mdplane/mdplane/controllers/members"
	"github.com/mdplane/mdplane/controllers/pairing"
	"github.com/mdplane/mdplane/controllers/podcache"
	"github.com/mdplane/mdplane/controllers/queues"
	"github.com/mdplane/mdplane/controllers/retirement"
	"github.com/mdplane/mdplane/controllers/rolemetrics"
	"github.com/mdplane/mdplane/controllers/roles"
	"github.com/mdplane/mdplane/controllers/rollout"
	"github.com/mdplane/mdplane/webhooks"
)

// options are the process's flags.
type options struct {
	certDir, host, metrics, health, pprof, namespace, queueTypes string
	port, apiBurst                                               int
	apiQPS                                                       float64
	leaderElect, enableWebhooks, enableControllers               bool
	controllers                                                  controllerOptions
	certs                                                        certificates
	metricsAPI                                                   metricsAPI
	zap                                                          zap.Options
}

func (o *options) bindFlags(fs *flag.FlagSet) {
	fs.StringVar(&o.certDir, "webhook-cert-dir", "/tmp/k8s-webhook-server/serving-certs", "directory holding the webhook server's tls.crt and tls.key")
	fs.StringVar(&o.host, "webhook-host", "", "address the webhook server binds; empty means every interface")
	fs.IntVar(&o.port, "webhook-port", 9443, "port the webhook server listens on")
	fs.StringVar(&o.metrics, "metrics-bind-address", ":8080", `address of the metrics endpoint; "0" disables it`)
	fs.StringVar(&o.health, "health-probe-bind-address", ":8081", "address of the health and readiness probes")
	fs.StringVar(&o.pprof, "pprof-bind-address", "", "address of the Go profiling endpoints (/debug/pprof); empty disables them")
	fs.DurationVar(&o.controllers.parkAfter, "park-after", admissioncheck.DefaultParkAfter, "how long a settled replica set may hold part of its quota before its Workloads are deactivated")
	fs.StringVar(&o.queueTypes, "queue-instance-types", "", "label selector of the InstanceTypes whose Kueue queues mdplane manages; empty means all")
	fs.BoolVar(&o.leaderElect, "leader-elect", false, "elect a leader, so that only one of several replicas reconciles")
	fs.BoolVar(&o.enableWebhooks, "enable-webhooks", true, "serve the ModelDeployment admission webhooks")
	fs.BoolVar(&o.enableControllers, "enable-controllers", true, "run the joint admission check, queue and rollout controllers")
	fs.BoolVar(&o.controllers.inventory, "instance-type-inventory", true, "derive each InstanceType's status.detail, status.accelerator (or status.cpu), phase and conditions from the Nodes and the Pods bound to them; false where GPUStack's own device discovery writes them")
	fs.BoolVar(&o.controllers.poolEndpoints, "kv-cache-pool-endpoints", true, "publish each KVCachePool's status.clientEndpoint from its external KVCacheBackend's Client endpoint (a managed backend's operator publishes its own), an external backend's endpoints and phase, and each KVCachePoolBinding's phase and quotas; false where GPUStack's pool reconciler runs")
	fs.IntVar(&o.controllers.memberWorkers, "member-workers", members.DefaultWorkers, "how many ModelReplicas have their Pods and Services created at once")
	fs.Float64Var(&o.apiQPS, "kube-api-qps", 0, "client-side limit of requests per second to the API server; 0 leaves it off, to the API server's priority and fairness")
	fs.IntVar(&o.apiBurst, "kube-api-burst", 0, "requests allowed at once above --kube-api-qps")
	fs.StringVar(&o.namespace, "namespace", os.Getenv("POD_NAMESPACE"), "namespace this process runs in: its leader-election lease, the webhook Service and certificate Secret (default $POD_NAMESPACE)")
	fs.DurationVar(&o.controllers.artifacts.RetryInterval, "model-artifact-retry-interval", artifacts.DefaultRetryInterval, "how long a ModelArtifact the hub refused (not found, access denied, ...) waits before it is tried again")
	o.certs = webhookCertificates()
	o.certs.bindFlags(fs)
	o.metricsAPI.bindFlags(fs)
	o.zap.BindFlags(fs)
}

func main() {
	var o options
	o.bindFlags(flag.CommandLine)
	flag.Parse()
	o.certs.namespace = o.namespace
	o.controllers.artifacts.Namespace = o.namespace
	o.controllers.namespace = o.namespace
	ctrl.SetLogger(zap.New(zap.UseFlagOptions(&o.zap)))
	if err := run(o); err != nil {
		ctrl.Log.WithName("mdplane-controllers").Error(err, "exiting")
		os.Exit(1)
	}
}

// run builds the manager, adds the parts the flags enable and runs it until a signal.
func run(o options) error {
	selector, err := labels.Parse(o.queueTypes)
	if err != nil {
		return fmt.Errorf("parsing --queue-instance-types: %w", err)
	}
	o.controllers.queueTypes = selector
	mgr, err := newManager(o)
	if err != nil {
		return err
	}
	if err := mgr.AddHealthzCheck("ping", healthz.Ping); err != nil {
		return fmt.Errorf("adding the health check: %w", err)
	}
	if o.enableWebhooks {
		ready, err := o.certs.manage(mgr, o.certDir)
		if err != nil {
			return fmt.Errorf("setting up the webhook certificates: %w", err)
		}
		if err := serveWebhooks(mgr, ready, o.namespace); err != nil {
			return err
		}
	}
	if err := o.metricsAPI.add(mgr, o.namespace); err != nil {
		return err
	}
	if o.enableControllers {
		o.controllers.drain = o.metricsAPI.drainScraper()
		if err := addControllers(mgr, o.controllers); err != nil {
			return err
		}
	}
	if err := mgr.Start(ctrl.SetupSignalHandler()); err != nil {
		return fmt.Errorf("running the manager: %w", err)
	}
	return nil
}

// newManager is the manager of every part: one scheme, one cache, one leader lease.
func newManager(o options) (manager.Manager, error) {
	scheme := runtime.NewScheme()
	for _, add := range []func(*runtime.Scheme) error{clientgoscheme.AddToScheme, workerv1.AddToScheme, v1alpha1.AddToScheme, kueue.AddToScheme} {
		if err := add(scheme); err != nil {
			return nil, fmt.Errorf("building the scheme: %w", err)
		}
	}
	cfg := ctrl.GetConfigOrDie()
	if o.apiQPS > 0 {
		cfg.QPS, cfg.Burst = float32(o.apiQPS), max(o.apiBurst, int(o.apiQPS))
	}
	mgr, err := ctrl.NewManager(cfg, ctrl.Options{
		Scheme:                  scheme,
		Metrics:                 metricsserver.Options{BindAddress: o.metrics},
		HealthProbeBindAddress:  o.health,
		PprofBindAddress:        o.pprof,
		LeaderElection:          o.leaderElect,
		LeaderElectionID:        "mdplane-controllers.worker.gpustack.ai",
		LeaderElectionNamespace: o.namespace,
		// Only the deployments' own Pods and Services are cached, not every one in the cluster, and
		// without their managed fields, which no controller reads (a tenth of the heap with 1,000 Pods);
		// a Pod without the container fields no controller reads either (podcache.Slim).
		Cache: cache.Options{DefaultTransform: cache.TransformStripManagedFields(), ByObject: map[client.Object]cache.ByObject{
			&corev1.Pod{}:                   {Label: labels.SelectorFromSet(naming.Managed()), Transform: podcache.Slim},
			&corev1.Service{}:               {Label: labels.SelectorFromSet(naming.Managed())},
			&appsv1.ControllerRevision{}:    {Label: labels.SelectorFromSet(naming.Managed())},
			&policyv1.PodDisruptionBudget{}: {Label: labels.SelectorFromSet(naming.Managed())},
			// Nodes are read for the images they hold only (Image delivery's placement).
			&corev1.Node{}: {Transform: members.CachedNode},
		}},
		WebhookServer: webhook.NewServer(webhook.Options{Host: o.host, Port: o.port, CertDir: o.certDir}),
	})
	if err != nil {
		return nil, fmt.Errorf("creating the manager: %w", err)
	}
	return mgr, nil
}

// addControllers sets the controllers up once the composite kinds are served. They come with the
// Configuration package, which may be installed after this process starts: wait for them rather
// than fail, and report not ready meanwhile. The wait runs on every replica, so a standby reports
// ready once the kinds are served; the controllers, their watches and the cache indexes they look
// objects up by are set up on the leader only, so a standby caches no Pods.
func addControllers(mgr manager.Manager, o controllerOptions) error {
	kindsServed := make(chan struct{})
	if err := mgr.Add(everyReplica(func(ctx context.Context) error {
		if err := waitForKinds(ctx, mgr.GetRESTMapper(), compositeKinds); err != nil {
			return err
		}
		close(kindsServed)
		return nil
	})); err != nil {
		return fmt.Errorf("adding the wait for the composite kinds: %w", err)
	}
	if err := mgr.Add(manager.RunnableFunc(func(ctx context.Context) error {
		select {
		case <-kindsServed:
			return setupControllers(ctx, mgr, o)
		case <-ctx.Done():
			return nil
		}
	})); err != nil {
		return fmt.Errorf("adding the controllers: %w", err)
	}
	if err := mgr.AddReadyzCheck("controllers", func(*http.Request) error {
		select {
		case <-kindsServed:
			return nil
		default:
			return errors.New("waiting for the composite kinds of the mdplane Configuration package")
		}
	}); err != nil {
		return fmt.Errorf("adding the readiness check: %w", err)
	}
	return nil
}

// serveWebhooks registers the admission webhooks once the serving certificate is in place (the
// webhook server starts with its first registration, and cannot start without its certificate), and
// reports ready only then. The domain claims of KVCachePoolBindings are Leases in namespace.
func serveWebhooks(mgr manager.Manager, certsReady <-chan struct{}, namespace string) error {
	registered := make(chan struct{})
	go func() {
		<-certsReady
		// Admission reads uncached: a stale cache must not decide admission. Concurrent reviews
		// share a read of the same object sent after they arrived, never one sent before.
		reader := &webhooks.SharedReads{Reader: mgr.GetAPIReader()}
		// Each review reads within webhooks.ReadBudget, or is refused: nothing is admitted unjudged.
		register := func(path string, h admission.Handler) {
			mgr.GetWebhookServer().Register(path, &webhook.Admission{Handler: webhooks.Budgeted{Handler: h, Budget: webhooks.ReadBudget}})
		}
		register(webhooks.ValidatePath, &webhooks.Validator{Reader: reader})
		register(webhooks.MutatePath, &webhooks.Defaulter{Reader: reader})
		register(webhooks.ValidateBackendPath, webhooks.BackendValidator{Reader: reader})
		// The claim Leases are written, never read, through the manager's client: reads are uncached,
		// and a Binding's own, unshared: its claim is taken at the resourceVersion it read.
		register(webhooks.ValidateBindingPath, &webhooks.BindingValidator{Reader: mgr.GetAPIReader(), Claims: mgr.GetClient(), Namespace: namespace})
		register(webhooks.ValidateArtifactPath, webhooks.ArtifactValidator{})
		register(webhooks.MutateArtifactPath, webhooks.ArtifactDefaulter{})
		register(webhooks.ValidateSettingsPath, &webhooks.SettingsValidator{Reader: reader})
		close(registered)
	}()
	if err := mgr.AddReadyzCheck("webhooks", func(req *http.Request) error {
		select {
		case <-registered:
			return mgr.GetWebhookServer().StartedChecker()(req)
		default:
			return errors.New("the webhook serving certificate is not in place yet")
		}
	}); err != nil {
		return fmt.Errorf("adding the readiness check: %w", err)
	}
	return nil
}

// controllerOptions are what the flags say of the controllers.
type controllerOptions struct {
	parkAfter                time.Duration
	memberWorkers            int
	queueTypes               labels.Selector
	artifacts                artifacts.Config
	drain                    rollout.DrainScraper
	inventory, poolEndpoints bool
	namespace                string // the process's own: the domain claim Leases
}

// setupControllers registers the cache indexes, every controller and the AdmissionCheck installer.
func setupControllers(ctx context.Context, mgr manager.Manager, o controllerOptions) error {
	if err := index.Register(ctx, mgr.GetFieldIndexer()); err != nil {
		return err
	}
	rolloutEvents := mgr.GetEventRecorder("model-deployment-rollout")
	// The rollout pacer's retirement operations, which the members and roles controllers read.
	retirements := retirement.NewBook()
	// The deletes of a leaving replica's members and Workload, which three controllers make.
	deletes := expectations.NewDeletes()
	type controller struct {
		name string
		r    interface{ SetupWithManager(ctrl.Manager) error }
	}
	controllers := []controller{
		{"the replica members", &members.Reconciler{Client: mgr.GetClient(),
			Recorder: mgr.GetEventRecorder("model-deployment-members"), Workers: o.memberWorkers, Retirements: retirements}},
		{"the joint admission check", &admissioncheck.Reconciler{Client: mgr.GetClient(), Reader: mgr.GetAPIReader(),
			Recorder: mgr.GetEventRecorder("model-deployment-joint"), Clock: clock.RealClock{}, ParkAfter: o.parkAfter}},
		{"the AdmissionCheck reconciler", &admissioncheck.CheckReconciler{Client: mgr.GetClient()}},
		{"the InstanceType queues", &queues.Reconciler{Client: mgr.GetClient(), Selector: o.queueTypes, Settings: mgr.GetAPIReader()}},
		{"the InstanceType cohort report", &queues.CohortReporter{Client: mgr.GetClient()}},
		// The node labels the queues' flavors select, whoever counts the types' capacity.
		{"the InstanceType node labels", &inventory.Membership{Client: mgr.GetClient()}},
		{"the Workload reaper", &rollout.WorkloadReaper{Client: mgr.GetClient(), Reader: mgr.GetAPIReader(), Deletes: deletes}},
		{"the replica departures", &rollout.Departures{Client: mgr.GetClient(), Recorder: rolloutEvents, Deletes: deletes, Retirements: retirements}},
		{"the instance Services", &rollout.InstanceServices{Client: mgr.GetClient()}},
		{"the roles' disruption budgets", &budgets.Reconciler{Client: mgr.GetClient()}},
		{"the transfer pairing", &pairing.Reconciler{Client: mgr.GetClient(), Recorder: mgr.GetEventRecorder("model-deployment-pairing")}},
		{"the role status", &roles.Reporter{Client: mgr.GetClient(), Retirements: retirements}},
		{"the rollout pacer", &rollout.Pacer{Client: mgr.GetClient(), Recorder: rolloutEvents, Reader: mgr.GetAPIReader(), Scraper: o.drain, Retirements: retirements, Deletes: deletes}},
		// The observation and operation ConfigMaps are read uncached: no ConfigMap of the cluster is cached.
		{"the Elastic EP resize and observation", &elastic.Reconciler{Client: mgr.GetClient(), Reader: mgr.GetAPIReader(), Engine: elastic.NewEngine()}},
		// A hub source's Secret is read uncached (get only): no Secret of the cluster is cached.
		{"the ModelArtifact resolver", &artifacts.Reconciler{Client: mgr.GetClient(), Secrets: mgr.GetAPIReader(),
			Recorder: mgr.GetEventRecorder("model-artifact-resolver"), Clock: clock.RealClock{}, Config: o.artifacts, Settings: mgr.GetAPIReader()}},
	}
	// Whoever publishes the pools' endpoints, the domain claims are mdplane's: its webhook takes them.
	controllers = append(controllers, controller{"the KVCachePoolBinding domain claims", &kvcachepools.ClaimReconciler{Client: mgr.GetClient(),
		Reader: mgr.GetAPIReader(), Namespace: o.namespace, Clock: clock.RealClock{}, Summarize: o.poolEndpoints}})
	if o.poolEndpoints {
		controllers = append(controllers, controller{"the KVCachePool endpoints", &kvcachepools.Reconciler{Client: mgr.GetClient(), Clock: clock.RealClock{}}},
			controller{"the external KVCacheBackends' status", &kvcachepools.BackendReconciler{Client: mgr.GetClient()}})
	}
	if o.inventory {
		// Every bound Pod of the cluster that is not mdplane's, slimmed, in a cache of its own: the
		// manager's holds mdplane's. Made here, on the leader, so that a standby caches none.
		pods, err := inventory.BoundPods(mgr.GetConfig(), mgr.GetScheme())
		if err != nil {
			return err
		}
		controllers = append(controllers, controller{"the InstanceType inventory", &inventory.Reconciler{Client: mgr.GetClient(), Pods: pods, Clock: clock.RealClock{}}})
	}
	for _, c := range controllers {
		if err := c.r.SetupWithManager(mgr); err != nil {
			return fmt.Errorf("setting up %s: %w", c.name, err)
		}
	}
	// The per-role gauges, on the leader only: a standby's would count every role twice.
	if err := ctrlmetrics.Registry.Register(&rolemetrics.Collector{Reader: mgr.GetClient(), Timeout: 10 * time.Second}); err != nil {
		return fmt.Errorf("registering the role gauges: %w", err)
	}
	return mgr.Add(manager.RunnableFunc(func(ctx context.Context) error {
		return admissioncheck.EnsureCheck(ctx, mgr.GetClient())
	}))
}
