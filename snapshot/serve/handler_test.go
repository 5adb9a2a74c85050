package serve

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/json"
	"encoding/pem"
	"io"
	"math/big"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	authorizationv1 "k8s.io/api/authorization/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	"github.com/mdplane/mdplane/apis/composite/v1alpha1"
	metricsv1 "github.com/mdplane/mdplane/apis/metrics/v1"
	workerv1 "github.com/mdplane/mdplane/apis/worker/v1"
	"github.com/mdplane/mdplane/snapshot"
)

// ca is a throw-away CA issuing client certificates.
type ca struct {
	cert *x509.Certificate
	key  *ecdsa.PrivateKey
	pem  string
}

func newCA(t *testing.T) *ca {
	key, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "front-proxy-ca"}, IsCA: true, BasicConstraintsValid: true,
		KeyUsage: x509.KeyUsageCertSign, NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour)}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	cert, _ := x509.ParseCertificate(der)
	return &ca{cert: cert, key: key, pem: string(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}))}
}

func (c *ca) client(t *testing.T, cn string) tls.Certificate {
	key, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(2), Subject: pkix.Name{CommonName: cn}, KeyUsage: x509.KeyUsageDigitalSignature,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}, NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour)}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, c.cert, &key.PublicKey, c.key)
	if err != nil {
		t.Fatal(err)
	}
	return tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key}
}

type fakeScraper struct{ body string }

func (f fakeScraper) Scrape(_ context.Context, targets []snapshot.Target) []snapshot.Read {
	var reads []snapshot.Read
	for _, t := range targets {
		fam, _ := snapshot.Parse(strings.NewReader(f.body))
		reads = append(reads, snapshot.Read{Target: t, Families: fam, At: time.Now()})
	}
	return reads
}

// world is a deployment md in team-a with one owned engine Pod, and an empty deployment idle.
func world(t *testing.T, proxyCA string) client.Client {
	s := runtime.NewScheme()
	for _, add := range []func(*runtime.Scheme) error{clientgoscheme.AddToScheme, workerv1.AddToScheme, v1alpha1.AddToScheme} {
		if err := add(s); err != nil {
			t.Fatal(err)
		}
	}
	ctl := func(apiVersion, kind, name, uid string) []metav1.OwnerReference {
		return []metav1.OwnerReference{{APIVersion: apiVersion, Kind: kind, Name: name, UID: types.UID("uid-" + uid), Controller: ptr.To(true)}}
	}
	labels := map[string]string{workerv1.LabelName: workerv1.NameModelDeployment, workerv1.LabelInstance: "md"}
	md := &workerv1.ModelDeployment{ObjectMeta: metav1.ObjectMeta{Name: "md", Namespace: "team-a", UID: "uid-md"},
		Spec: workerv1.ModelDeploymentSpec{Engine: workerv1.ModelDeploymentEngine{Name: workerv1.EngineVLLM}, Roles: []workerv1.ModelDeploymentRole{{Name: "server"}}}}
	idle := &workerv1.ModelDeployment{ObjectMeta: metav1.ObjectMeta{Name: "idle", Namespace: "team-a", UID: "uid-idle"},
		Spec: workerv1.ModelDeploymentSpec{Engine: workerv1.ModelDeploymentEngine{Name: workerv1.EngineVLLM}, Roles: []workerv1.ModelDeploymentRole{{Name: "server"}}}}
	role := &v1alpha1.ModelRole{ObjectMeta: metav1.ObjectMeta{Name: "md-server", Namespace: "team-a", UID: "uid-role", Labels: labels,
		OwnerReferences: ctl("worker.gpustack.ai/v1", "ModelDeployment", "md", "md")}}
	replica := &v1alpha1.ModelReplica{ObjectMeta: metav1.ObjectMeta{Name: "md-server-0-x", Namespace: "team-a", UID: "uid-replica", Labels: labels,
		OwnerReferences: ctl(v1alpha1.SchemeGroupVersion.String(), "ModelRole", "md-server", "role")}}
	podLabels := map[string]string{workerv1.LabelName: workerv1.NameModelDeployment, workerv1.LabelInstance: "md", workerv1.LabelComponent: "server"}
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "md-server-0", Namespace: "team-a", UID: "uid-pod", Labels: podLabels,
		OwnerReferences: ctl(v1alpha1.SchemeGroupVersion.String(), "ModelReplica", "md-server-0-x", "replica")}}
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "extension-apiserver-authentication", Namespace: "kube-system"},
		Data: map[string]string{"requestheader-client-ca-file": proxyCA, "requestheader-allowed-names": `["front-proxy-client"]`,
			"requestheader-username-headers": `["X-Remote-User"]`, "requestheader-group-headers": `["X-Remote-Group"]`}}
	return fake.NewClientBuilder().WithScheme(s).WithObjects(md, idle, role, replica, pod, cm).
		WithInterceptorFuncs(interceptor.Funcs{Create: func(ctx context.Context, c client.WithWatch, obj client.Object, opts ...client.CreateOption) error {
			if sar, ok := obj.(*authorizationv1.SubjectAccessReview); ok {
				a := sar.Spec.ResourceAttributes
				sar.Status.Allowed = sar.Spec.User == "alice" && a.Group == "worker.gpustack.ai" && a.Resource == "modeldeployments" &&
					a.Subresource == "metrics" && a.Verb == "get" && a.Namespace == "team-a"
				return nil
			}
			return c.Create(ctx, obj, opts...)
		}}).Build()
}

func TestTheSnapshotAPI(t *testing.T) {
	authority := newCA(t)
	c := world(t, authority.pem)
	h := &Handler{Reader: c, Reviews: c, Proxy: &FrontProxy{Reader: c}, Now: time.Now,
		Scraper: fakeScraper{body: "vllm:num_requests_running 3\nvllm:num_requests_waiting 1\n"}}
	srv := serveOverTLS(t, h)
	proxy := func(cert tls.Certificate) *http.Client {
		return &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{Certificates: []tls.Certificate{cert}, InsecureSkipVerify: true}}} //nolint:gosec // test server
	}
	frontProxy := proxy(authority.client(t, "front-proxy-client"))
	const base = "/apis/metrics.worker.gpustack.ai/v1"
	cases := []struct {
		name     string
		client   *http.Client
		method   string
		path     string
		user     string
		code     int
		contains string
	}{
		{name: "the version's discovery lists modeldeployments/metrics", client: frontProxy, path: base, code: 200, contains: `"name":"modeldeployments/metrics"`},
		{name: "the group's discovery prefers v1", client: frontProxy, path: "/apis/metrics.worker.gpustack.ai", code: 200, contains: `"preferredVersion":{"groupVersion":"metrics.worker.gpustack.ai/v1"`},
		{name: "a caller without a client certificate is refused", client: proxy(tls.Certificate{}), path: base, code: 401, contains: "no client certificate"},
		{name: "a certificate of another CA is refused", client: proxy(newCA(t).client(t, "front-proxy-client")), path: base, code: 401, contains: "not signed by the requestheader CA"},
		{name: "a certificate of a name not allowed is refused", client: proxy(authority.client(t, "someone")), path: base, code: 401, contains: "not among the requestheader allowed names"},
		{name: "a user granted get modeldeployments/metrics reads the snapshot", client: frontProxy, user: "alice",
			path: base + "/namespaces/team-a/modeldeployments/md/metrics", code: 200, contains: `"processing":[{"name":"running","source":"vllm:num_requests_running","scope":"engine/server","unit":"requests","value":3,"podCount":1`},
		{name: "a user without the grant is forbidden", client: frontProxy, user: "bob",
			path: base + "/namespaces/team-a/modeldeployments/md/metrics", code: 403, contains: `User \"bob\" cannot get resource \"modeldeployments/metrics\" in API group \"worker.gpustack.ai\" in the namespace \"team-a\"`},
		{name: "a deployment that does not exist is not found", client: frontProxy, user: "alice",
			path: base + "/namespaces/team-a/modeldeployments/nope/metrics", code: 404, contains: `modeldeployments.worker.gpustack.ai \"nope\" not found`},
		{name: "a deployment without owned Pods is unavailable", client: frontProxy, user: "alice",
			path: base + "/namespaces/team-a/modeldeployments/idle/metrics", code: 503, contains: `"message":"ModelDeployment has no owned metrics Pods"`},
		{name: "another path is not found", client: frontProxy, user: "alice", path: base + "/namespaces/team-a/modeldeployments/md", code: 404},
		{name: "only GET is served", client: frontProxy, user: "alice", method: http.MethodPost,
			path: base + "/namespaces/team-a/modeldeployments/md/metrics", code: 405, contains: "POST is not supported"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			method := tc.method
			if method == "" {
				method = http.MethodGet
			}
			req, _ := http.NewRequest(method, srv.URL+tc.path, nil)
			if tc.user != "" {
				req.Header.Set("X-Remote-User", tc.user)
				req.Header.Add("X-Remote-Group", "system:authenticated")
			}
			body := expectResponse(t, tc.client, req, tc.code, tc.contains)
			if tc.code == 200 && strings.HasSuffix(tc.path, "/metrics") {
				var m metricsv1.ModelDeploymentMetrics
				if err := json.Unmarshal(body, &m); err != nil || m.Kind != "ModelDeploymentMetrics" || m.APIVersion != "metrics.worker.gpustack.ai/v1" || m.Name != "md" {
					t.Fatalf("object: %v %+v", err, m.TypeMeta)
				}
			}
		})
	}
}

// serveOverTLS serves h over TLS, asking for the client's certificate as the server does.
func serveOverTLS(t *testing.T, h http.Handler) *httptest.Server {
	srv := httptest.NewUnstartedServer(h)
	srv.TLS = &tls.Config{ClientAuth: tls.RequestClientCert, MinVersion: tls.VersionTLS12}
	srv.StartTLS()
	t.Cleanup(srv.Close)
	return srv
}

// expectResponse sends req and fails unless the answer has the code and its body the text.
func expectResponse(t *testing.T, c *http.Client, req *http.Request, code int, contains string) []byte {
	t.Helper()
	rsp, err := c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer rsp.Body.Close()
	body, _ := io.ReadAll(rsp.Body)
	if rsp.StatusCode != code || !strings.Contains(string(body), contains) {
		t.Fatalf("HTTP %d %s\nwant %d containing %s", rsp.StatusCode, body, code, contains)
	}
	return body
}
