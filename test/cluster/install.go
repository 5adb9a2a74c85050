package cluster

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"fmt"
	"log"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/registry"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	authv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	"k8s.io/client-go/util/retry"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/mdplane/mdplane/internal/packaging"
)

// PackageVersion is the release the stack builds and installs mdplane's packages as.
const PackageVersion = packaging.Version

// Namespace is where the install manifest puts mdplane's controllers, webhooks and certificate.
const Namespace = "mdplane-system"

// install installs mdplane the way docs/install.md tells a platform team to, as far as a machine
// without a container runtime allows:
//   - `make xpkg`'s packages are pushed to an OCI registry served on loopback with TLS, which
//     Crossplane trusts through --ca-bundle-path, and an ImageConfig rewrites ghcr.io/mdplane to it;
//   - `kubectl apply --server-side -k package/` installs the CRDs, RBAC, webhook configurations and
//     the ClusterRole Crossplane aggregates;
//   - the two Deployments' programs run as local processes, each with a token of its own
//     ServiceAccount, so the install manifest's RBAC is what they are allowed; the webhooks issue
//     their certificate and inject its CA themselves, and the webhook configurations are pointed at
//     their loopback address instead of the Service (there is no Pod network);
//   - the Configuration is installed by Crossplane's package manager, which resolves its Function
//     dependencies from the registry; the stack plays Crossplane's External package runtime,
//     publishing each Function revision's endpoint (the local function process) and its health.
func (s *Stack) install(ctx context.Context) error {
	root, err := repoRoot()
	if err != nil {
		return err
	}
	if err := s.startRegistry(); err != nil {
		return err
	}
	if err := s.Publish(ctx, PackageVersion); err != nil {
		return err
	}
	if _, err := s.Kubectl("apply", "--server-side", "-k", filepath.Join(root, "package")); err != nil {
		return err
	}
	if err := s.startWebhooks(ctx, root); err != nil {
		return err
	}
	// Started before the Configuration, as `kubectl apply -k` starts it: it waits for the kinds.
	if err := s.launchControllersAs(ctx, root); err != nil {
		return err
	}
	if err := s.routeMetricsAPI(ctx); err != nil {
		return err
	}
	for _, obj := range []map[string]any{
		{"apiVersion": "pkg.crossplane.io/v1beta1", "kind": "ImageConfig",
			"metadata": map[string]any{"name": "mdplane-mirror"},
			"spec": map[string]any{
				"matchImages":  []any{map[string]any{"type": "Prefix", "prefix": packaging.Registry + "/"}},
				"rewriteImage": map[string]any{"prefix": s.Registry + "/mdplane/"},
			}},
		{"apiVersion": "pkg.crossplane.io/v1", "kind": "Configuration",
			"metadata": map[string]any{"name": "mdplane"},
			"spec":     map[string]any{"package": packaging.Registry + "/mdplane:" + PackageVersion}},
	} {
		if err := s.Client.Create(ctx, &unstructured.Unstructured{Object: obj}); err != nil {
			return err
		}
	}
	runtimeCtx, stop := context.WithCancel(context.Background())
	s.stops = append(s.stops, stop)
	go s.serveFunctionRevisions(runtimeCtx)
	if err := waitFor(ctx, nil, 120*time.Second, "the Configuration and its Functions", s.packagesHealthy); err != nil {
		return err
	}
	if err := waitFor(ctx, nil, 60*time.Second, "Crossplane granted mdplane's composites", s.crossplaneServesComposites); err != nil {
		return err
	}
	return s.controllersReady(ctx)
}

// routeMetricsAPI points the controllers' APIServices at their loopback port: their Service becomes
// an ExternalName of 127.0.0.1 (the aggregator dials an ExternalName Service's name at the
// APIService's port, k8s.io/apiserver/pkg/util/proxy.ResolveCluster), and each APIService's port the
// one the controllers serve on.
func (s *Stack) routeMetricsAPI(ctx context.Context) error {
	svc := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: Namespace, Name: "mdplane-metrics-api"}}
	if err := s.Client.Delete(ctx, svc); err != nil {
		return fmt.Errorf("replacing the metrics API Service: %w", err)
	}
	svc = &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: Namespace, Name: "mdplane-metrics-api",
		Labels: map[string]string{"app.kubernetes.io/part-of": "mdplane"}},
		Spec: corev1.ServiceSpec{Type: corev1.ServiceTypeExternalName, ExternalName: "127.0.0.1"}}
	if err := waitFor(ctx, nil, 30*time.Second, "the metrics API Service replaced", func() error { return s.Client.Create(ctx, svc) }); err != nil {
		return err
	}
	return s.RouteAPIServices(ctx)
}

// RouteAPIServices points every APIService of the mdplane-metrics-api Service (the metrics snapshot,
// the roles, and the roles' custom metrics once package/autoscaling is applied) at the port the
// controllers serve on.
func (s *Stack) RouteAPIServices(ctx context.Context) error {
	apis := &unstructured.UnstructuredList{}
	apis.SetAPIVersion("apiregistration.k8s.io/v1")
	apis.SetKind("APIServiceList")
	if err := s.Client.List(ctx, apis); err != nil {
		return err
	}
	patch := fmt.Sprintf(`{"spec":{"service":{"port":%d}}}`, s.metricsAPI.port)
	for i := range apis.Items {
		api := &apis.Items[i]
		if name, _, _ := unstructured.NestedString(api.Object, "spec", "service", "name"); name != "mdplane-metrics-api" {
			continue
		}
		if err := s.Client.Patch(ctx, api, client.RawPatch(types.MergePatchType, []byte(patch))); err != nil {
			return err
		}
	}
	return nil
}

// repoRoot is the checkout the stack runs from.
func repoRoot() (string, error) {
	here, err := packageDir()
	if err != nil {
		return "", err
	}
	return filepath.Abs(filepath.Join(here, "..", ".."))
}

// startRegistry serves an in-memory OCI registry over TLS on loopback, with a certificate of the
// stack's CA (the bundle Crossplane was started with).
func (s *Stack) startRegistry() error {
	certs := filepath.Join(s.Dir, "certs", "registry")
	if err := s.ca.issue(certs, "registry", 5); err != nil {
		return err
	}
	cert, err := tls.LoadX509KeyPair(filepath.Join(certs, "tls.crt"), filepath.Join(certs, "tls.key"))
	if err != nil {
		return err
	}
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return err
	}
	logFile, err := os.Create(filepath.Join(s.Dir, "logs", "registry.log"))
	if err != nil {
		return err
	}
	srv := &http.Server{
		Handler:           registry.New(registry.Logger(log.New(logFile, "", log.LstdFlags))),
		TLSConfig:         &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12},
		ReadHeaderTimeout: 10 * time.Second,
		ErrorLog:          log.New(logFile, "", log.LstdFlags),
	}
	go func() { _ = srv.ServeTLS(lis, "", "") }()
	s.stops = append(s.stops, func() { _ = srv.Close(); _ = logFile.Close() })
	s.Registry = lis.Addr().String()
	return nil
}

// Publish builds every artifact of this checkout as a release and pushes it to the stack's registry,
// as a release pipeline pushes to ghcr.io/mdplane.
func (s *Stack) Publish(ctx context.Context, version string) error {
	root, err := repoRoot()
	if err != nil {
		return err
	}
	built, err := packaging.Build(ctx, root, version, filepath.Join(s.Dir, "xpkg", version))
	if err != nil {
		return err
	}
	byName := map[string][]packaging.Built{}
	for _, b := range built {
		byName[b.Name] = append(byName[b.Name], b)
	}
	for _, a := range packaging.Artifacts {
		if err := s.push(byName[a.Name], version); err != nil {
			return err
		}
	}
	return nil
}

// push uploads an artifact's builds to the stack's registry under the path it is published at, the
// way `crossplane xpkg push` does: the package's layer annotations restored from its config labels,
// and the builds of an image with a runtime, one per architecture, as one multi-platform index.
func (s *Stack) push(builds []packaging.Built, version string) error {
	ref, err := name.ParseReference(s.Registry + "/mdplane/" + builds[0].Name + ":" + version)
	if err != nil {
		return err
	}
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(s.ca.pem)
	transport := remote.WithTransport(&http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}})
	if builds[0].Runtime == "" {
		img, err := builds[0].Image()
		if err == nil {
			err = remote.Write(ref, img, transport)
		}
		if err != nil {
			return fmt.Errorf("pushing %s: %w", ref, err)
		}
		return nil
	}
	index, err := packaging.Index(builds)
	if err == nil {
		err = remote.WriteIndex(ref, index, transport)
	}
	if err != nil {
		return fmt.Errorf("pushing %s: %w", ref, err)
	}
	return nil
}

// ControllersUser is the name mdplane-controllers authenticates as: its ServiceAccount's.
const ControllersUser = "system:serviceaccount:" + Namespace + ":mdplane-controllers"

// serviceAccountKubeconfig writes a kubeconfig that authenticates as a ServiceAccount (of the
// install manifest, or of Crossplane's chart), with a bound token from the TokenRequest API.
func (s *Stack) serviceAccountKubeconfig(ctx context.Context, namespace, account string) (string, error) {
	sa := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: account}}
	tr := &authv1.TokenRequest{Spec: authv1.TokenRequestSpec{ExpirationSeconds: ptr.To[int64](24 * 3600)}}
	if err := s.Client.SubResource("token").Create(ctx, sa, tr); err != nil {
		return "", fmt.Errorf("requesting a token of ServiceAccount %s/%s: %w", namespace, account, err)
	}
	cfg := clientcmdapi.NewConfig()
	cfg.Clusters["stack"] = &clientcmdapi.Cluster{Server: s.Config.Host, CertificateAuthorityData: s.Config.CAData}
	cfg.AuthInfos[account] = &clientcmdapi.AuthInfo{Token: tr.Status.Token}
	cfg.Contexts[account] = &clientcmdapi.Context{Cluster: "stack", AuthInfo: account}
	cfg.CurrentContext = account
	path := filepath.Join(s.Dir, "config", namespace+"."+account+".kubeconfig")
	return path, clientcmd.WriteToFile(*cfg, path)
}

// buildControllers builds mdplane-controllers from this checkout, once.
func (s *Stack) buildControllers(root string) (string, error) {
	return s.buildCommand(root, "mdplane-controllers")
}

// CLI is the mdplane command line built from this checkout (once per stack), for the tests that run
// it as a user would.
func (s *Stack) CLI() (string, error) {
	root, err := repoRoot()
	if err != nil {
		return "", err
	}
	return s.buildCommand(root, "mdplane")
}

// buildCommand builds ./cmd/<name> of the checkout into the stack's directory, once per stack: a
// directory kept from an earlier stack (make cluster-up's) may hold the binary of an older
// checkout, which is built again (Go's build cache makes an unchanged one cheap).
func (s *Stack) buildCommand(root, name string) (string, error) {
	bin := filepath.Join(s.Dir, name)
	if _, built := s.built.LoadOrStore(name, true); built {
		return bin, nil
	}
	args := []string{"build", "-o", bin}
	if name == "mdplane-controllers" {
		// The stack's fake Pods' addresses lead nowhere: the scrapes and probes are dialed to the
		// stack's exporter through a flag the released binary lacks.
		args = append(args, "-tags", "mdplane_testhooks")
	}
	build := exec.Command("go", append(args, "./cmd/"+name)...)
	build.Dir = root
	if out, err := build.CombinedOutput(); err != nil {
		return "", fmt.Errorf("building %s: %w\n%s", name, err, out)
	}
	return bin, nil
}

// startWebhooks runs the webhooks Deployment's program as its ServiceAccount, two replicas as the
// Deployment has, behind a loopback balancer standing in for the webhook Service: the installed
// webhook configurations are pointed at the balancer first (their CA bundle the replicas inject
// themselves).
func (s *Stack) startWebhooks(ctx context.Context, root string) error {
	balancer, err := newBalancer(WebhookReplicas)
	if err != nil {
		return err
	}
	s.stops = append(s.stops, balancer.close)
	s.webhooks.balancer = balancer
	for _, kind := range []string{"ValidatingWebhookConfiguration", "MutatingWebhookConfiguration"} {
		cfg := &unstructured.Unstructured{}
		cfg.SetAPIVersion("admissionregistration.k8s.io/v1")
		cfg.SetKind(kind)
		if err := s.Client.Get(ctx, types.NamespacedName{Name: "mdplane"}, cfg); err != nil {
			return err
		}
		hooks, _, _ := unstructured.NestedSlice(cfg.Object, "webhooks")
		var patch []map[string]any
		for i, h := range hooks {
			path, _, _ := unstructured.NestedString(h.(map[string]any), "clientConfig", "service", "path")
			patch = append(patch, map[string]any{"op": "replace", "path": fmt.Sprintf("/webhooks/%d/clientConfig", i),
				"value": map[string]any{"url": fmt.Sprintf("https://localhost:%d%s", balancer.port, path)}})
		}
		raw, err := json.Marshal(patch)
		if err != nil {
			return err
		}
		if err := s.Client.Patch(ctx, cfg, client.RawPatch(types.JSONPatchType, raw)); err != nil {
			return err
		}
	}
	kubeconfig, err := s.serviceAccountKubeconfig(ctx, Namespace, "mdplane-webhooks")
	if err != nil {
		return err
	}
	if s.webhooks.bin, err = s.buildControllers(root); err != nil {
		return err
	}
	s.webhooks.kubeconfig = kubeconfig
	for i := range WebhookReplicas {
		if err := s.StartWebhook(ctx, i); err != nil {
			return err
		}
	}
	return nil
}

// WebhookReplicas is how many replicas of mdplane-webhooks the stack runs, as the Deployment does.
const WebhookReplicas = 2

// webhooks is how the replicas of mdplane-webhooks run: their program, credentials, the balancer in
// front of them and each replica's process and ports.
type webhooks struct {
	bin, kubeconfig string
	balancer        *balancer
	replicas        [WebhookReplicas]*webhookReplica
}

type webhookReplica struct {
	process      *process
	port, health int
	stopMount    context.CancelFunc
}

// StartWebhook starts replica i of mdplane-webhooks (again, after KillWebhook), with its own
// certificate directory kept from the shared Secret as a kubelet would, and waits until it is ready
// and the balancer sends it connections.
func (s *Stack) StartWebhook(ctx context.Context, i int) error {
	port, err := freePort()
	if err != nil {
		return err
	}
	health, err := freePort()
	if err != nil {
		return err
	}
	certDir := filepath.Join(s.Dir, "certs", "webhooks-"+strconv.Itoa(i))
	mountCtx, stopMount := context.WithCancel(context.Background())
	s.stops = append(s.stops, stopMount)
	go s.mountSecret(mountCtx, "mdplane-webhook-cert", certDir)
	name := "mdplane-webhooks"
	if i > 0 {
		name += "-" + strconv.Itoa(i)
	}
	if old := s.webhooks.replicas[i]; old != nil {
		name += "-again"
	}
	p, err := s.run(name, s.webhooks.bin, []string{
		"--kubeconfig=" + s.webhooks.kubeconfig, "--enable-controllers=false", "--namespace=" + Namespace,
		"--webhook-cert-secret=mdplane-webhook-cert", "--webhook-service=mdplane-webhook", "--webhook-extra-dns-names=localhost",
		"--webhook-cert-dir=" + certDir, "--webhook-host=127.0.0.1", "--webhook-port=" + strconv.Itoa(port),
		"--metrics-bind-address=0", "--health-probe-bind-address=127.0.0.1:" + strconv.Itoa(health),
	})
	if err != nil {
		stopMount()
		return err
	}
	s.webhooks.replicas[i] = &webhookReplica{process: p, port: port, health: health, stopMount: stopMount}
	if err := waitFor(ctx, p, 60*time.Second, name, httpOK(fmt.Sprintf("http://127.0.0.1:%d/readyz", health))); err != nil {
		return err
	}
	s.webhooks.balancer.set(i, "127.0.0.1:"+strconv.Itoa(port))
	return nil
}

// KillWebhook ends replica i of mdplane-webhooks with SIGKILL; the balancer's next connections go
// to the other replica, as a Service's endpoints lose a Pod that failed its readiness.
func (s *Stack) KillWebhook(i int) {
	r := s.webhooks.replicas[i]
	if r == nil {
		return
	}
	r.process.kill()
	r.stopMount()
	s.webhooks.balancer.set(i, "")
}

// WebhookAddress is the loopback address replica i of mdplane-webhooks serves on, or "" when it is
// not running.
func (s *Stack) WebhookAddress(i int) string {
	if r := s.webhooks.replicas[i]; r != nil {
		select {
		case <-r.process.done:
			return ""
		default:
			return "127.0.0.1:" + strconv.Itoa(r.port)
		}
	}
	return ""
}

// WebhookConnections is how many connections the balancer has sent each replica.
func (s *Stack) WebhookConnections() []int64 { return s.webhooks.balancer.counts() }

// mountSecret does what the kubelet does for the webhooks Deployment's secret volume: it keeps the
// Secret's keys as files in dir.
func (s *Stack) mountSecret(ctx context.Context, name, dir string) {
	written := ""
	for ctx.Err() == nil {
		secret := &corev1.Secret{}
		if err := s.Client.Get(ctx, types.NamespacedName{Namespace: Namespace, Name: name}, secret); err == nil &&
			secret.ResourceVersion != written && len(secret.Data) > 0 {
			if err := os.MkdirAll(dir, 0o755); err == nil {
				ok := true
				for key, value := range secret.Data {
					tmp := filepath.Join(dir, "."+key)
					ok = ok && os.WriteFile(tmp, value, 0o600) == nil && os.Rename(tmp, filepath.Join(dir, key)) == nil
				}
				if ok {
					written = secret.ResourceVersion
				}
			}
		}
		select {
		case <-ctx.Done():
		case <-time.After(500 * time.Millisecond):
		}
	}
}

// launchControllersAs starts the controllers Deployment's program as its ServiceAccount.
func (s *Stack) launchControllersAs(ctx context.Context, root string) error {
	kubeconfig, err := s.serviceAccountKubeconfig(ctx, Namespace, "mdplane-controllers")
	if err != nil {
		return err
	}
	bin, err := s.buildControllers(root)
	if err != nil {
		return err
	}
	health, err := freePort()
	if err != nil {
		return err
	}
	metrics, err := freePort()
	if err != nil {
		return err
	}
	profile, err := s.profileFlag("mdplane-controllers", "--pprof-bind-address")
	if err != nil {
		return err
	}
	// The metrics API is served by every replica behind the mdplane-metrics-api Service; on the
	// stack, a balancer with a slot per replica (the first is this one's).
	metricsAPIPort, err := freePort()
	if err != nil {
		return err
	}
	if s.metricsAPI, err = newBalancer(2); err != nil {
		return err
	}
	s.stops = append(s.stops, s.metricsAPI.close)
	s.metricsAPI.set(0, "127.0.0.1:"+strconv.Itoa(metricsAPIPort))
	s.MetricsExporter = &Exporter{Default: IdleGauges}
	exporter := httptest.NewServer(s.MetricsExporter)
	s.stops = append(s.stops, exporter.Close)
	s.controllers = controllers{bin: bin, health: health, args: append(append([]string{
		"--kubeconfig=" + kubeconfig, "--enable-webhooks=false", "--leader-elect", "--namespace=" + Namespace,
		"--metrics-bind-address=127.0.0.1:" + strconv.Itoa(metrics), "--health-probe-bind-address=127.0.0.1:" + strconv.Itoa(health),
		"--metrics-api-bind-address=127.0.0.1:" + strconv.Itoa(metricsAPIPort),
		"--metrics-scrape-dial-override=" + exporter.Listener.Addr().String(),
	}, profile...), s.opts.ControllerArgs...)}
	return s.launchControllers()
}

// serveFunctionRevisions is the External package runtime: every active revision of one of the
// stack's Functions gets the endpoint of the function's local process, the Secret of its serving
// certificate, and a healthy runtime.
func (s *Stack) serveFunctionRevisions(ctx context.Context) {
	serving, err := os.ReadFile(filepath.Join(s.Dir, "certs", "functions", "tls.crt"))
	if err != nil {
		return
	}
	for ctx.Err() == nil {
		revisions := &unstructured.UnstructuredList{}
		revisions.SetAPIVersion("pkg.crossplane.io/v1")
		revisions.SetKind("FunctionRevisionList")
		if err := s.Client.List(ctx, revisions); err == nil {
			for i := range revisions.Items {
				rev := &revisions.Items[i]
				if endpoint, ours := s.functionEndpoint(rev.GetLabels()["pkg.crossplane.io/package"]); ours {
					s.publishRuntime(ctx, rev, endpoint, serving)
				}
			}
		}
		select {
		case <-ctx.Done():
		case <-time.After(500 * time.Millisecond):
		}
	}
}

// functionEndpoint is where the stack serves the Function package pkg (its name on the cluster).
func (s *Stack) functionEndpoint(pkg string) (string, bool) {
	for _, fn := range s.functions {
		if fn.name == pkg {
			return fn.address, true
		}
	}
	if address, ok := s.served.Load(pkg); ok {
		return address.(string), true
	}
	return "", false
}

// publishRuntime writes a revision's endpoint, TLS server Secret and RuntimeHealthy condition, if they
// are not there.
func (s *Stack) publishRuntime(ctx context.Context, rev *unstructured.Unstructured, endpoint string, serving []byte) {
	secretName := rev.GetLabels()["pkg.crossplane.io/package"] + "-tls-server"
	secret := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "crossplane-system", Name: secretName},
		Data: map[string][]byte{"tls.crt": serving}}
	if err := s.Client.Create(ctx, secret); err != nil && !apierrors.IsAlreadyExists(err) {
		return
	}
	healthy := func(u *unstructured.Unstructured) bool {
		if name, _, _ := unstructured.NestedString(u.Object, "status", "tlsServerSecretName"); name != secretName {
			return false
		}
		got, _, _ := unstructured.NestedString(u.Object, "status", "endpoint")
		conditions, _, _ := unstructured.NestedSlice(u.Object, "status", "conditions")
		for _, c := range conditions {
			if c := c.(map[string]any); c["type"] == "RuntimeHealthy" && c["status"] == "True" {
				return got == endpoint
			}
		}
		return false
	}
	if healthy(rev) {
		return
	}
	_ = retry.RetryOnConflict(retry.DefaultRetry, func() error {
		if err := s.Client.Get(ctx, client.ObjectKeyFromObject(rev), rev); err != nil || healthy(rev) {
			return err
		}
		_ = unstructured.SetNestedField(rev.Object, endpoint, "status", "endpoint")
		_ = unstructured.SetNestedField(rev.Object, secretName, "status", "tlsServerSecretName")
		conditions, _, _ := unstructured.NestedSlice(rev.Object, "status", "conditions")
		kept := []any{}
		for _, c := range conditions {
			if c.(map[string]any)["type"] != "RuntimeHealthy" {
				kept = append(kept, c)
			}
		}
		kept = append(kept, map[string]any{"type": "RuntimeHealthy", "status": "True", "reason": "HealthyPackageRevision",
			"lastTransitionTime": time.Now().UTC().Format(time.RFC3339),
			"message":            "served by the e2e stack as a local process at " + endpoint})
		_ = unstructured.SetNestedSlice(rev.Object, kept, "status", "conditions")
		return s.Client.Status().Update(ctx, rev)
	})
}

// packagesHealthy passes once the Configuration and every Function it depends on report Healthy
// and Installed, and the composite kinds are served.
func (s *Stack) packagesHealthy() error {
	ctx := context.Background()
	for _, pkg := range []struct{ kind, name string }{
		{"Configuration", "mdplane"}, {"Function", "mdplane-function-render-roles"}, {"Function", "mdplane-function-kv-cache"},
	} {
		u := &unstructured.Unstructured{}
		u.SetAPIVersion("pkg.crossplane.io/v1")
		u.SetKind(pkg.kind)
		if err := s.Client.Get(ctx, types.NamespacedName{Name: pkg.name}, u); err != nil {
			return err
		}
		if err := conditionsTrue(u, "Installed", "Healthy"); err != nil {
			return fmt.Errorf("%s %s: %w", pkg.kind, pkg.name, err)
		}
	}
	return s.compositesServed()
}

// conditionsTrue says which of the named conditions of an object is not True, and why.
func conditionsTrue(u *unstructured.Unstructured, types ...string) error {
	conditions, _, _ := unstructured.NestedSlice(u.Object, "status", "conditions")
	for _, t := range types {
		found := false
		for _, c := range conditions {
			c := c.(map[string]any)
			if c["type"] != t {
				continue
			}
			found = true
			if c["status"] != "True" {
				return fmt.Errorf("%s is %v (%v: %v)", t, c["status"], c["reason"], c["message"])
			}
		}
		if !found {
			return fmt.Errorf("no %s condition yet", t)
		}
	}
	return nil
}
