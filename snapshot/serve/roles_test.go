package serve

import (
	"context"
	"crypto/tls"
	"net/http"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/types"

	workerv1 "github.com/mdplane/mdplane/apis/worker/v1"
)

// The roles group and the roles' custom metrics, one row per rule; the kube-apiserver authorizes
// before it proxies, so every row comes through the front proxy.
func TestTheRolesAndTheirCustomMetrics(t *testing.T) {
	authority := newCA(t)
	c := world(t, authority.pem)
	h := &Handler{Reader: c, Reviews: c, Writer: c, Proxy: &FrontProxy{Reader: c}, Now: time.Now,
		Scraper: fakeScraper{body: "vllm:num_requests_running 3\nvllm:num_requests_waiting 1\n"}}
	srv := serveOverTLS(t, h)
	frontProxy := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{ //nolint:gosec // test server
		Certificates: []tls.Certificate{authority.client(t, "front-proxy-client")}, InsecureSkipVerify: true}}}
	const roles = "/apis/roles.worker.gpustack.ai/v1"
	const scale = roles + "/namespaces/team-a/modeldeploymentroles/md.server/scale"
	const custom = "/apis/custom.metrics.k8s.io/v1beta2"
	cases := []struct {
		rule, method, path, contentType, body string
		accept                                string
		code                                  int
		contains                              string
		replicas                              int32 // the deployment's spec.roles[0].replicas after the row, when the row writes
	}{
		{rule: "the cluster's discovery lists the three groups", path: "/apis", code: 200, contains: `"name":"custom.metrics.k8s.io"`},
		{rule: "the version lists the roles and their scale subresource, a Scale of autoscaling/v1", path: roles, code: 200,
			contains: `{"name":"modeldeploymentroles/scale","singularName":"","namespaced":true,"group":"autoscaling","version":"v1","kind":"Scale","verbs":["get","update","patch"]}`},
		{rule: "a namespace lists a role per role of each deployment", path: roles + "/namespaces/team-a/modeldeploymentroles", code: 200,
			contains: `"name":"idle.server"`},
		{rule: "kubectl get reads a table of the roles: deployment, role, kind, declared and Ready", path: roles + "/namespaces/team-a/modeldeploymentroles",
			accept: "application/json;as=Table;v=v1;g=meta.k8s.io,application/json", code: 200, contains: `"cells":["idle.server","idle","server","Server",0,0,`},
		{rule: "a role is named <deployment>.<role> and selects its Pods", path: roles + "/namespaces/team-a/modeldeploymentroles/md.server", code: 200,
			contains: `"selector":"app.kubernetes.io/component=server,app.kubernetes.io/instance=md,app.kubernetes.io/name=model-deployment"`},
		{rule: "a name without a role is not found", path: roles + "/namespaces/team-a/modeldeploymentroles/md", code: 404},
		{rule: "a role the deployment lacks is not found", path: roles + "/namespaces/team-a/modeldeploymentroles/md.decode/scale", code: 404},
		{rule: "the scale reads the declared count", path: scale, code: 200, contains: `"kind":"Scale","apiVersion":"autoscaling/v1"`},
		{rule: "a merge patch of the scale writes spec.roles[i].replicas", method: http.MethodPatch, path: scale,
			contentType: string(types.MergePatchType), body: `{"spec":{"replicas":3}}`, code: 200, contains: `"spec":{"replicas":3}`, replicas: 3},
		{rule: "an update of the scale writes it too", method: http.MethodPut, path: scale,
			body: `{"apiVersion":"autoscaling/v1","kind":"Scale","metadata":{"name":"md.server","namespace":"team-a"},"spec":{"replicas":2}}`,
			code: 200, contains: `"spec":{"replicas":2}`, replicas: 2},
		{rule: "a JSON patch is not taken", method: http.MethodPatch, path: scale, contentType: string(types.JSONPatchType),
			body: `[{"op":"replace","path":"/spec/replicas","value":5}]`, code: 415, contains: "not a JSON patch", replicas: 2},
		{rule: "a negative count is refused, naming the field", method: http.MethodPatch, path: scale, contentType: string(types.MergePatchType),
			body: `{"spec":{"replicas":-1}}`, code: 400, contains: "spec.replicas", replicas: 2},
		{rule: "a role itself is not written", method: http.MethodPut, path: roles + "/namespaces/team-a/modeldeploymentroles/md.server", body: `{}`, code: 405},
		{rule: "the custom metrics list the roles' metrics", path: custom, code: 200,
			contains: `"name":"modeldeploymentroles.roles.worker.gpustack.ai/waiting_requests"`},
		{rule: "a role's waiting requests are its engine Pods' waiting requests, summed", path: custom + "/namespaces/team-a/modeldeploymentroles.roles.worker.gpustack.ai/md.server/waiting_requests",
			code: 200, contains: `"metric":{"name":"waiting_requests"},"timestamp":`},
		{rule: "a metric not served is not found", path: custom + "/namespaces/team-a/modeldeploymentroles.roles.worker.gpustack.ai/md.server/kv_usage", code: 404},
		{rule: "a deployment whose Pods cannot be read has no metric", path: custom + "/namespaces/team-a/modeldeploymentroles.roles.worker.gpustack.ai/idle.server/waiting_requests", code: 503},
	}
	for _, tc := range cases {
		t.Run(tc.rule, func(t *testing.T) {
			method := tc.method
			if method == "" {
				method = http.MethodGet
			}
			req, _ := http.NewRequest(method, srv.URL+tc.path, strings.NewReader(tc.body))
			req.Header.Set("X-Remote-User", "system:serviceaccount:kube-system:horizontal-pod-autoscaler")
			if tc.accept != "" {
				req.Header.Set("Accept", tc.accept)
			}
			if tc.contentType != "" {
				req.Header.Set("Content-Type", tc.contentType)
			}
			expectResponse(t, frontProxy, req, tc.code, tc.contains)
			if tc.replicas != 0 {
				md := &workerv1.ModelDeployment{}
				if err := c.Get(context.Background(), types.NamespacedName{Namespace: "team-a", Name: "md"}, md); err != nil {
					t.Fatal(err)
				}
				if md.Spec.Roles[0].Replicas != tc.replicas {
					t.Fatalf("spec.roles[0].replicas is %d, want %d", md.Spec.Roles[0].Replicas, tc.replicas)
				}
			}
		})
	}
}
