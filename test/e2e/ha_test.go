package e2e

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	admissionv1 "k8s.io/api/admission/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	"github.com/mdplane/mdplane/test/cluster"
	"github.com/mdplane/mdplane/webhooks"
)

// controllersLease is the leader lease the replicas of mdplane-controllers elect by.
const controllersLease = "mdplane-controllers.worker.gpustack.ai"

// leaseHolder is the identity holding the controllers' leader lease.
func leaseHolder(ctx context.Context) (string, error) {
	lease := &coordinationv1.Lease{}
	if err := stack.Client.Get(ctx, client.ObjectKey{Namespace: cluster.Namespace, Name: controllersLease}, lease); err != nil {
		return "", err
	}
	return ptr.Deref(lease.Spec.HolderIdentity, ""), nil
}

// TestStandbyFinishesARollout: mdplane-controllers run as two replicas electing a leader, as the
// package's Deployment runs them. The leader is killed (SIGKILL, no lease release) while a rolling
// edit of a four-replica role has its first replacement in flight; the standby takes the lease once
// it lapses and finishes the rollout from the replacement the ModelRole remembers, with the rollout
// invariants watched throughout (one configuration per instance, no Pod changed in place, at most one
// replica missing), within three minutes of the kill.
func TestStandbyFinishesARollout(t *testing.T) {
	sequential(t, "kills the controllers' leader")
	ctx := context.Background()
	ns := ownName(t, "ns")
	const name = "standby"
	if _, err := stack.StandbyControllers(ctx); err != nil {
		t.Fatal(err)
	}
	runOnH20(t, ctx, ns, "rollout-ha", 4, name, 4, deploymentOnH20(ns, name, "server Server 4 1"))
	check := watchInvariants(t, ctx, ns, name, 4)
	defer check()
	before, err := leaseHolder(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := stack.Kubectl("patch", "modeldeployment", name, "-n", ns, "--type=json",
		"-p", `[{"op":"add","path":"/spec/roles/0/extraArgs","value":["--max-model-len","8192"]}]`); err != nil {
		t.Fatal(err)
	}
	eventually(t, 2*time.Minute, "the first replacement in flight", func() error {
		v, err := recordedReplacement(ctx, ns, name, "server")
		if err != nil || v == "" {
			return fmt.Errorf("replacing=%q: %v", v, err)
		}
		return nil
	})
	killed, err := stack.KillLeaderControllers(ctx)
	if err != nil {
		t.Fatal(err)
	}
	killedAt := time.Now()
	t.Logf("killed the leader %s; the standby takes over", killed)
	eventually(t, 3*time.Minute, "the standby holding the lease and the rollout finished", func() error {
		holder, err := leaseHolder(ctx)
		if err != nil {
			return err
		}
		if holder == before || !stack.Leads() {
			return fmt.Errorf("the lease is still %q's", holder)
		}
		return runningWith(ctx, ns, name, 4, "--max-model-len 8192")
	})
	t.Logf("the standby finished the rollout %s after the leader was killed", time.Since(killedAt).Round(time.Second))
	// The aggregated API is mdplane-api's, not the controllers': with the leader gone the APIService
	// stays available (an unavailable one would stall discovery, and with it every namespace deletion).
	if out, err := stack.Kubectl("get", "--raw", "/apis/metrics.worker.gpustack.ai/v1"); err != nil {
		t.Fatalf("the metrics API with the leader gone: %v\n%s", err, out)
	}
}

// refusedByAWebhook is a deployment only the validating webhook refuses (its reserved env name is
// none of the schema's business), and the refusal's words.
const refusedByAWebhook, webhookRefusal = `apiVersion: worker.gpustack.ai/v1
kind: ModelDeployment
metadata: {name: reserved-env, namespace: team-wh}
spec:
  model: {name: Qwen/Qwen3-8B}
  engine: {name: vLLM, image: vllm/vllm-openai:v0.25.1}
  roles:
    - {name: server, instanceType: gpustack-nvidia-a10g-linux-amd64, env: [{name: GPUSTACK_REPLICA_SIZE, value: "2"}]}
`, "GPUSTACK_REPLICA_SIZE"

// webhookServerName is the name the webhooks' certificate is issued for: their Service's.
const webhookServerName = "mdplane-webhook." + cluster.Namespace + ".svc"

// reviewDirectly sends one replica of mdplane-webhooks, by its own address, the admission review a
// create of manifest would get, trusting only the CA the replicas keep in their Secret, and returns
// the response.
func reviewDirectly(t *testing.T, ctx context.Context, address, manifest string) *admissionv1.AdmissionResponse {
	t.Helper()
	roots := webhookCA(t, ctx)
	object, err := yaml.YAMLToJSON([]byte(manifest))
	if err != nil {
		t.Fatal(err)
	}
	review := admissionv1.AdmissionReview{TypeMeta: metav1.TypeMeta{APIVersion: "admission.k8s.io/v1", Kind: "AdmissionReview"},
		Request: &admissionv1.AdmissionRequest{UID: "e2e", Operation: admissionv1.Create, Namespace: "team-wh", Name: "reserved-env",
			Kind:     metav1.GroupVersionKind{Group: "worker.gpustack.ai", Version: "v1", Kind: "ModelDeployment"},
			Resource: metav1.GroupVersionResource{Group: "worker.gpustack.ai", Version: "v1", Resource: "modeldeployments"},
			Object:   runtime.RawExtension{Raw: object}}}
	body, err := json.Marshal(review)
	if err != nil {
		t.Fatal(err)
	}
	httpClient := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: roots, ServerName: webhookServerName, MinVersion: tls.VersionTLS12}}}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, "https://"+address+webhooks.ValidatePath, bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := httpClient.Do(req)
	if err != nil {
		t.Fatalf("replica at %s: %v", address, err)
	}
	defer resp.Body.Close()
	got := admissionv1.AdmissionReview{}
	if err := json.NewDecoder(resp.Body).Decode(&got); err != nil || got.Response == nil {
		t.Fatalf("replica at %s answered %s: %v", address, resp.Status, err)
	}
	return got.Response
}

// TestWebhooksServedByEither: mdplane-webhooks runs as two replicas behind one Service. Each replica answers a review itself, with a certificate of the one
// CA both keep in their Secret; with either replica killed, the API server's creates are still
// judged, by the other: a refused deployment is refused with the webhook's own words, an admissible
// one admitted.
func TestWebhooksServedByEither(t *testing.T) {
	sequential(t, "kills each webhook replica in turn")
	ctx := context.Background()
	applyCluster(t, ctx, "team-wh")
	t.Cleanup(func() { tearDown(t, ctx, "team-wh") })
	for i := range cluster.WebhookReplicas {
		address := stack.WebhookAddress(i)
		if address == "" {
			t.Fatalf("webhook replica %d is not running", i)
		}
		resp := reviewDirectly(t, ctx, address, refusedByAWebhook)
		if resp.Allowed || resp.Result == nil || !strings.Contains(resp.Result.Message, webhookRefusal) {
			t.Fatalf("replica %d answered %+v, want a refusal naming %s", i, resp, webhookRefusal)
		}
	}
	admissible := strings.Replace(strings.Replace(refusedByAWebhook, `, env: [{name: GPUSTACK_REPLICA_SIZE, value: "2"}]`, "", 1), "reserved-env", "admissible", 1)
	file := filepath.Join(t.TempDir(), "admissible.yaml")
	if err := os.WriteFile(file, []byte(admissible), 0o600); err != nil {
		t.Fatal(err)
	}
	for i := range cluster.WebhookReplicas {
		if err := stack.KillWebhook(ctx, i); err != nil {
			t.Fatal(err)
		}
		for range 3 {
			if out := applyRefused(t, refusedByAWebhook); !strings.Contains(out, webhookRefusal) {
				t.Fatalf("with replica %d down, kubectl printed:\n%s", i, out)
			}
		}
		if out, err := stack.Kubectl("create", "--dry-run=server", "-f", file); err != nil {
			t.Fatalf("with replica %d down, an admissible deployment: %v\n%s", i, err, out)
		}
		if err := stack.StartWebhooks(ctx); err != nil {
			t.Fatal(err)
		}
	}
}

// webhookCA is the CA the webhook replicas keep in their certificate Secret.
func webhookCA(t *testing.T, ctx context.Context) *x509.CertPool {
	t.Helper()
	secret := &corev1.Secret{}
	if err := stack.Client.Get(ctx, client.ObjectKey{Namespace: cluster.Namespace, Name: "mdplane-webhook-cert"}, secret); err != nil {
		t.Fatal(err)
	}
	roots := x509.NewCertPool()
	if !roots.AppendCertsFromPEM(secret.Data["ca.crt"]) {
		t.Fatal("no CA in the webhook certificate Secret")
	}
	return roots
}
