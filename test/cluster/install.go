package cluster

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/registry"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	authv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	"k8s.io/utils/ptr"

	"github.com/mdplane/mdplane/internal/packaging"
)

// PackageVersion is the release the stack builds and installs mdplane's packages as.
const PackageVersion = packaging.Version

// Namespace is where the install manifest puts mdplane's controllers, webhooks and certificate.
const Namespace = "mdplane-system"

// install installs mdplane the way docs/install.md tells a platform team to:
//   - `make xpkg`'s packages and the controllers' image were pushed to the stack's registry (while
//     the stack started: buildInBackground), which
//     Crossplane trusts through its chart's registryCaBundleConfig and the node's containerd
//     through its registry hosts; an ImageConfig rewrites ghcr.io/mdplane to it for Crossplane,
//     the node's registry hosts for the kubelet;
//   - `kubectl apply --server-side -k package/` installs the CRDs, RBAC, webhook configurations, the
//     ClusterRole Crossplane aggregates and the two Deployments, whose Pods run on the real node
//     from the shipped image, reached through their Services (the flags Deviations lists for the
//     controllers are added by a kustomize overlay, as a platform team adds its own);
//   - the Configuration is installed by Crossplane's package manager, which resolves its Function
//     dependencies from the registry and runs each as a Deployment with its default runtime.
func (s *Stack) install(ctx context.Context) error {
	overlay, err := s.installOverlay()
	if err != nil {
		return err
	}
	if _, err := s.Kubectl("apply", "--server-side", "-k", overlay); err != nil {
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
	if err := waitFor(ctx, nil, 3*time.Minute, "the Configuration and its Functions", s.packagesHealthy); err != nil {
		return err
	}
	if err := waitFor(ctx, nil, 60*time.Second, "Crossplane granted mdplane's composites", s.crossplaneServesComposites); err != nil {
		return err
	}
	for _, d := range []string{"mdplane-webhooks", "mdplane-controllers", "mdplane-api"} {
		if err := waitFor(ctx, nil, 2*time.Minute, d, func() error { return s.deploymentAvailable(ctx, Namespace, d) }); err != nil {
			return err
		}
	}
	if err := s.webhooksRouted(ctx, WebhookReplicas); err != nil {
		return err
	}
	return waitFor(ctx, nil, time.Minute, "a leader of mdplane-controllers", func() error {
		if !s.Leads() {
			return errors.New("no running replica holds the leader lease yet")
		}
		return nil
	})
}

// installOverlay is the kustomization the stack applies: package/ with the controllers' flags of
// Options.ControllerArgs (and the profiling endpoints of Options.Profile, on the webhooks too) added, as a platform
// team's overlay adds its own.
func (s *Stack) installOverlay() (string, error) {
	root, err := repoRoot()
	if err != nil {
		return "", err
	}
	dir := filepath.Join(s.Dir, "config", "mdplane-install")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", err
	}
	// kustomize takes a base outside its root only through a relative path.
	link := filepath.Join(dir, "package")
	_ = os.Remove(link)
	if err := os.Symlink(filepath.Join(root, "package"), link); err != nil {
		return "", err
	}
	args := slices.Clone(s.opts.ControllerArgs)
	if s.opts.Profile {
		args = append(args, "--pprof-bind-address=:"+strconv.Itoa(ProfilePort))
	}
	kustomization := "apiVersion: kustomize.config.k8s.io/v1beta1\nkind: Kustomization\nresources: [package]\n"
	if len(args) > 0 {
		var ops []map[string]any
		for _, a := range args {
			ops = append(ops, map[string]any{"op": "add", "path": "/spec/template/spec/containers/0/args/-", "value": a})
		}
		patch, err := json.Marshal(ops)
		if err != nil {
			return "", err
		}
		kustomization += "patches:\n  - target: {kind: Deployment, name: mdplane-controllers}\n    patch: '" + string(patch) + "'\n"
	}
	if s.opts.Profile { // the patches key is there: the controllers' flags hold the profiling endpoint
		kustomization += "  - target: {kind: Deployment, name: mdplane-webhooks}\n    patch: '" +
			`[{"op": "add", "path": "/spec/template/spec/containers/0/args/-", "value": "--pprof-bind-address=:` + strconv.Itoa(ProfilePort) + `"}]'` + "\n"
	}
	return dir, os.WriteFile(filepath.Join(dir, "kustomization.yaml"), []byte(kustomization), 0o644)
}

// ProfilePort is where mdplane-controllers serves Go's profiling endpoints when Options.Profile is
// on.
const ProfilePort = 6060

// repoRoot is the checkout the stack runs from.
func repoRoot() (string, error) {
	here, err := packageDir()
	if err != nil {
		return "", err
	}
	return filepath.Abs(filepath.Join(here, "..", ".."))
}

// startRegistry serves an in-memory OCI registry over TLS on the machine's address, where the real
// node's containerd and Crossplane's Pod reach it, with a certificate of the stack's CA (the bundle
// both trust, RegistryCA).
func (s *Stack) startRegistry(ctx context.Context) error {
	certs := filepath.Join(s.Dir, "certs", "registry")
	if err := s.ca.issue(certs, "registry", 5, s.hostIP); err != nil {
		return err
	}
	if err := os.WriteFile(s.RegistryCA(), s.ca.pem, 0o644); err != nil {
		return err
	}
	cert, err := tls.LoadX509KeyPair(filepath.Join(certs, "tls.crt"), filepath.Join(certs, "tls.key"))
	if err != nil {
		return err
	}
	lis, err := net.Listen("tcp", net.JoinHostPort(s.hostIP, "0"))
	if err != nil {
		return err
	}
	logFile, err := os.Create(filepath.Join(s.Dir, "logs", "registry.log"))
	if err != nil {
		return err
	}
	srv := &http.Server{
		Handler:           bodiesReadFirst(registry.New(registry.Logger(log.New(logFile, "", log.LstdFlags)))),
		TLSConfig:         &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12},
		ReadHeaderTimeout: 10 * time.Second,
		ErrorLog:          log.New(logFile, "", log.LstdFlags),
	}
	go func() { _ = srv.ServeTLS(lis, "", "") }()
	s.stops = append(s.stops, func() { _ = srv.Close(); _ = logFile.Close() })
	s.Registry = lis.Addr().String()
	return nil
}

// bodiesReadFirst reads a request's whole body before the registry handles it. go-containerregistry's
// in-memory registry reads an upload's body while holding its one lock; a client pushing several
// blobs at once over HTTP/2 sends them on one connection, whose flow-control window the uploads
// waiting for the lock fill with data nobody reads, so the upload holding the lock never receives
// the rest of its body and every push hangs. Read first, each stream drains on its own.
func bodiesReadFirst(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Body != nil && r.Body != http.NoBody {
			body, err := io.ReadAll(r.Body)
			if err != nil {
				http.Error(w, "reading the request body: "+err.Error(), http.StatusBadRequest)
				return
			}
			r.Body = io.NopCloser(bytes.NewReader(body))
		}
		h.ServeHTTP(w, r)
	})
}

// buildInBackground builds and pushes the node's images and this checkout's release while the stack
// goes on starting; s.images and s.release each report once. Stop cancels the builds and waits for
// them, so a stack that failed to start leaves no build writing into its directory.
func (s *Stack) buildInBackground(ctx context.Context) error {
	ctx, s.cancelBuilds = context.WithCancel(ctx)
	s.images, s.release = make(chan error, 1), make(chan error, 1)
	s.builds.Go(func() { s.images <- s.publishStackImages(ctx) })
	s.builds.Go(func() { s.release <- s.Publish(ctx, PackageVersion) })
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

// serviceAccountKubeconfig writes a kubeconfig that authenticates as a ServiceAccount (of the
// install manifest, or of Crossplane's chart), with a bound token from the TokenRequest API.
func (s *Stack) serviceAccountKubeconfig(ctx context.Context, namespace, account string) (string, error) {
	cfg, err := s.serviceAccountConfig(ctx, namespace, account)
	if err != nil {
		return "", err
	}
	path := filepath.Join(s.Dir, "config", namespace+"."+account+".kubeconfig")
	return path, clientcmd.WriteToFile(*cfg, path)
}

// serviceAccountConfig is a kubeconfig, in memory, of a fresh bound token of a ServiceAccount.
func (s *Stack) serviceAccountConfig(ctx context.Context, namespace, account string) (*clientcmdapi.Config, error) {
	sa := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: account}}
	tr := &authv1.TokenRequest{Spec: authv1.TokenRequestSpec{ExpirationSeconds: ptr.To[int64](24 * 3600)}}
	if err := s.Client.SubResource("token").Create(ctx, sa, tr); err != nil {
		return nil, fmt.Errorf("requesting a token of ServiceAccount %s/%s: %w", namespace, account, err)
	}
	cfg := clientcmdapi.NewConfig()
	cfg.Clusters["stack"] = &clientcmdapi.Cluster{Server: s.Config.Host, CertificateAuthorityData: s.Config.CAData}
	cfg.AuthInfos[account] = &clientcmdapi.AuthInfo{Token: tr.Status.Token}
	cfg.Contexts[account] = &clientcmdapi.Context{Cluster: "stack", AuthInfo: account}
	cfg.CurrentContext = account
	return cfg, nil
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
// checkout, which is built again (Go's build cache makes an unchanged one cheap). Tests that ask at
// once all wait for the one build.
func (s *Stack) buildCommand(root, name string) (string, error) {
	bin := filepath.Join(s.Dir, name)
	once, _ := s.built.LoadOrStore(name, &commandBuild{})
	b := once.(*commandBuild)
	b.once.Do(func() {
		build := exec.Command("go", "build", "-o", bin, "./cmd/"+name)
		build.Dir = root
		if out, err := build.CombinedOutput(); err != nil {
			b.err = fmt.Errorf("building %s: %w\n%s", name, err, out)
		}
	})
	return bin, b.err
}

// commandBuild is one command's build for the stack, run by the first caller.
type commandBuild struct {
	once sync.Once
	err  error
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
