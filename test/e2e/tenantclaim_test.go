package e2e

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	admissionv1 "k8s.io/api/admission/v1"
	authzv1 "k8s.io/api/authorization/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	workerv1 "github.com/mdplane/mdplane/apis/worker/v1"
	"github.com/mdplane/mdplane/internal/tenantclaim"
	"github.com/mdplane/mdplane/test/cluster"
	"github.com/mdplane/mdplane/webhooks"
)

// claimNamespaces are the two tenants whose Bindings race for one domain.
var claimNamespaces = [2]string{"team-claim-a", "team-claim-b"}

func claimBinding(namespace, name, pool, domain string) *workerv1.KVCachePoolBinding {
	return &workerv1.KVCachePoolBinding{TypeMeta: metav1.TypeMeta{APIVersion: workerv1.SchemeGroupVersion.String(), Kind: workerv1.KVCachePoolBindingKind},
		ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name},
		Spec: workerv1.KVCachePoolBindingSpec{PoolRef: workerv1.KVCachePoolReference{Name: pool},
			Domain: workerv1.KVCacheDomain{Name: domain, BlockSize: 16, Dtype: "bfloat16"}, Quota: workerv1.KVCachePoolBindingQuota{Ceiling: resource.MustParse("1Gi")}}}
}

// claimPool creates an external backend and a pool on it, removed when the test ends.
func claimPool(t *testing.T, ctx context.Context, pool, backend string) {
	t.Helper()
	b := &workerv1.KVCacheBackend{ObjectMeta: metav1.ObjectMeta{Name: backend}, Spec: workerv1.KVCacheBackendSpec{Connection: workerv1.KVCacheBackendConnection{
		External: &workerv1.KVCacheBackendExternal{Endpoints: []workerv1.KVCacheBackendEndpoint{
			{Name: workerv1.KVCacheBackendEndpointNameClient, Address: backend + ".example:50051"}, {Name: workerv1.KVCacheBackendEndpointNameAdmin, Address: backend + ".example:9003"}}}}}}
	p := &workerv1.KVCachePool{ObjectMeta: metav1.ObjectMeta{Name: pool},
		Spec: workerv1.KVCachePoolSpec{Backends: []string{backend}, Quota: workerv1.KVCachePoolQuota{Total: resource.MustParse("1Ti")}}}
	for _, o := range []client.Object{b, p} {
		if err := stack.Client.Create(ctx, o); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = stack.Client.Delete(context.Background(), o) })
	}
}

func claimTenants(t *testing.T, ctx context.Context) {
	t.Helper()
	for _, ns := range claimNamespaces {
		if err := stack.Client.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); err != nil && !apierrors.IsAlreadyExists(err) {
			t.Fatal(err)
		}
	}
}

// reviewBindingAt sends the replica at address the admission review of a create of b, trusting only
// the CA the replicas keep in their Secret.
func reviewBindingAt(ctx context.Context, roots *x509.CertPool, address string, b *workerv1.KVCachePoolBinding) (*admissionv1.AdmissionResponse, error) {
	object, err := json.Marshal(b)
	if err != nil {
		return nil, err
	}
	review := admissionv1.AdmissionReview{TypeMeta: metav1.TypeMeta{APIVersion: "admission.k8s.io/v1", Kind: "AdmissionReview"},
		Request: &admissionv1.AdmissionRequest{UID: "e2e", Operation: admissionv1.Create, Namespace: b.Namespace, Name: b.Name,
			Kind:     metav1.GroupVersionKind{Group: "worker.gpustack.ai", Version: "v1", Kind: workerv1.KVCachePoolBindingKind},
			Resource: metav1.GroupVersionResource{Group: "worker.gpustack.ai", Version: "v1", Resource: "kvcachepoolbindings"},
			Object:   runtime.RawExtension{Raw: object}}}
	body, err := json.Marshal(review)
	if err != nil {
		return nil, err
	}
	httpClient := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: roots, ServerName: webhookServerName, MinVersion: tls.VersionTLS12}}}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, "https://"+address+webhooks.ValidateBindingPath, bytes.NewReader(body))
	if err != nil {
		return nil, err
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := httpClient.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	got := admissionv1.AdmissionReview{}
	if err := json.NewDecoder(resp.Body).Decode(&got); err != nil || got.Response == nil {
		return nil, fmt.Errorf("replica at %s answered %s: %v", address, resp.Status, err)
	}
	return got.Response, nil
}

// TestOneDomainOneBindingAcrossWebhookReplicas: a domain name is unique per cache master however the
// creates race. Pairs of reviews of one domain, one at each webhook replica at once, admit exactly
// one of each pair; pairs of creates through the API server store exactly one of each pair. The
// claims are Leases in the operator's namespace, which the webhooks may take there and nowhere else.
func TestOneDomainOneBindingAcrossWebhookReplicas(t *testing.T) {
	parallel(t)
	ctx := context.Background()
	claimTenants(t, ctx)
	claimPool(t, ctx, "claim-race", "claim-race-master")
	roots := webhookCA(t, ctx)
	addresses := [2]string{stack.WebhookAddress(0), stack.WebhookAddress(1)}
	if addresses[0] == "" || addresses[1] == "" {
		t.Fatalf("both webhook replicas must run: %v", addresses)
	}
	t.Cleanup(func() { deleteClaims(t, "claim-race-master") })

	t.Run("reviews racing at the two replicas: one of each pair admitted", func(t *testing.T) {
		for pair := range 20 {
			domain := fmt.Sprintf("race-%d", pair)
			var wg sync.WaitGroup
			answers, errs := [2]*admissionv1.AdmissionResponse{}, [2]error{}
			for i := range 2 {
				wg.Go(func() {
					answers[i], errs[i] = reviewBindingAt(ctx, roots, addresses[i], claimBinding(claimNamespaces[i], "cache", "claim-race", domain))
				})
			}
			wg.Wait()
			for i, err := range errs {
				if err != nil {
					t.Fatalf("pair %d, replica %d: %v", pair, i, err)
				}
			}
			if answers[0].Allowed == answers[1].Allowed {
				t.Fatalf("domain %s: replica 0 allowed %t, replica 1 allowed %t; want exactly one (%v / %v)", domain, answers[0].Allowed, answers[1].Allowed,
					answers[0].Result, answers[1].Result)
			}
			refused := answers[0]
			if refused.Allowed {
				refused = answers[1]
			}
			if refused.Result == nil || !strings.Contains(refused.Result.Message, `domain "`+domain+`" on KVCacheBackend "claim-race-master"`) {
				t.Fatalf("the refusal does not name the domain and the master: %v", refused.Result)
			}
		}
	})

	t.Run("creates racing through the API server: one of each pair stored", func(t *testing.T) {
		for pair := range 10 {
			domain := fmt.Sprintf("api-%d", pair)
			var wg sync.WaitGroup
			errs := [2]error{}
			for i := range 2 {
				wg.Go(func() {
					errs[i] = stack.Client.Create(ctx, claimBinding(claimNamespaces[i], domain, "claim-race", domain))
				})
			}
			wg.Wait()
			stored := 0
			for i, err := range errs {
				switch {
				case err == nil:
					stored++
					t.Cleanup(func() {
						_ = stack.Client.Delete(context.Background(), claimBinding(claimNamespaces[i], domain, "claim-race", domain))
					})
				case !apierrors.IsInvalid(err) || !strings.Contains(err.Error(), "spec.domain.name"):
					t.Fatalf("domain %s, namespace %s: %v", domain, claimNamespaces[i], err)
				}
			}
			if stored != 1 {
				t.Fatalf("domain %s: %d of the pair stored, want 1 (%v)", domain, stored, errs)
			}
		}
	})

	t.Run("the webhooks take claims in their namespace only; the controllers release them", func(t *testing.T) {
		const controllers, hooks = "mdplane-controllers", "mdplane-webhooks"
		for _, row := range []struct {
			rule, account, verb, resource, group, namespace string
			allowed                                         bool
		}{
			{"the webhooks take a domain claim in their namespace", hooks, "create", "leases", "coordination.k8s.io", cluster.Namespace, true},
			{"the webhooks take over a stale claim", hooks, "update", "leases", "coordination.k8s.io", cluster.Namespace, true},
			{"the webhooks never write a Lease in a tenant's namespace", hooks, "create", "leases", "coordination.k8s.io", claimNamespaces[0], false},
			{"the webhooks never delete a claim", hooks, "delete", "leases", "coordination.k8s.io", cluster.Namespace, false},
			{"the controllers release a gone Binding's claim", controllers, "delete", "leases", "coordination.k8s.io", cluster.Namespace, true},
			{"the controllers never delete a Lease elsewhere", controllers, "delete", "leases", "coordination.k8s.io", claimNamespaces[0], false},
			{"the controllers report a Binding's claim", controllers, "patch", "kvcachepoolbindings/status", "worker.gpustack.ai", claimNamespaces[0], true},
			{"the controllers never edit a Binding's spec", controllers, "update", "kvcachepoolbindings", "worker.gpustack.ai", claimNamespaces[0], false},
		} {
			resource, subresource, _ := strings.Cut(row.resource, "/")
			review := &authzv1.SubjectAccessReview{Spec: authzv1.SubjectAccessReviewSpec{
				User: "system:serviceaccount:" + cluster.Namespace + ":" + row.account,
				ResourceAttributes: &authzv1.ResourceAttributes{Verb: row.verb, Group: row.group, Resource: resource, Subresource: subresource,
					Namespace: row.namespace},
			}}
			if err := stack.Client.Create(ctx, review); err != nil {
				t.Fatal(err)
			}
			if review.Status.Allowed != row.allowed {
				t.Errorf("%s: %s may %s %s in %s: %t, want %t", row.rule, row.account, row.verb, row.resource, row.namespace, review.Status.Allowed, row.allowed)
			}
		}
	})
}

// deleteClaims removes the claims on master the test's reviews took for Bindings never stored.
func deleteClaims(t *testing.T, master string) {
	var leases coordinationv1.LeaseList
	if err := stack.Client.List(context.Background(), &leases, client.InNamespace(cluster.Namespace), client.HasLabels{tenantclaim.LabelClaim}); err != nil {
		t.Error(err)
		return
	}
	for i := range leases.Items {
		if leases.Items[i].Annotations[tenantclaim.AnnotationBackend] == master {
			_ = stack.Client.Delete(context.Background(), &leases.Items[i])
		}
	}
}

// TestADomainIsClaimedWhenItsPoolAppears: two Bindings of one domain created before their pool are
// admitted unclaimed. Once the pool and its backend exist, the controller claims for both: exactly
// one holds the domain, the other reads DomainClaimed=False naming the holder and the way out, and
// takes the claim when the holder goes.
func TestADomainIsClaimedWhenItsPoolAppears(t *testing.T) {
	parallel(t)
	ctx := context.Background()
	claimTenants(t, ctx)
	t.Cleanup(func() { deleteClaims(t, "claim-late-master") })
	for _, ns := range claimNamespaces {
		b := claimBinding(ns, "late", "claim-late", "late")
		if err := stack.Client.Create(ctx, b); err != nil {
			t.Fatalf("a Binding whose pool does not exist yet is admitted: %v", err)
		}
		t.Cleanup(func() { _ = stack.Client.Delete(context.Background(), b) })
	}
	conditions := func() (map[string]*metav1.Condition, error) {
		out := map[string]*metav1.Condition{}
		for _, ns := range claimNamespaces {
			b := &workerv1.KVCachePoolBinding{}
			if err := stack.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: "late"}, b); err != nil {
				return nil, err
			}
			out[ns] = meta.FindStatusCondition(b.Status.Conditions, workerv1.BindingDomainClaimed)
		}
		return out, nil
	}
	eventually(t, 30*time.Second, "both Bindings say the master is not known", func() error {
		got, err := conditions()
		if err != nil {
			return err
		}
		for ns, c := range got {
			if c == nil || c.Reason != workerv1.ReasonMasterUnknown {
				return fmt.Errorf("%s: %v", ns, c)
			}
		}
		return nil
	})

	claimPool(t, ctx, "claim-late", "claim-late-master")
	var winner, loser string
	eventually(t, 30*time.Second, "exactly one Binding holds the domain", func() error {
		got, err := conditions()
		if err != nil {
			return err
		}
		winner, loser = "", ""
		for ns, c := range got {
			switch {
			case c != nil && c.Status == metav1.ConditionTrue:
				winner = ns
			case c != nil && c.Status == metav1.ConditionFalse && c.Reason == workerv1.ReasonDomainTaken:
				loser = ns
			}
		}
		if winner == "" || loser == "" {
			return fmt.Errorf("conditions %v", got)
		}
		for _, part := range []string{"KVCachePoolBinding " + winner + "/late already claims domain \"late\"", "get no cache client", "another spec.domain.name"} {
			if !strings.Contains(got[loser].Message, part) {
				return fmt.Errorf("the loser's condition does not say %q: %s", part, got[loser].Message)
			}
		}
		return nil
	})

	if err := stack.Client.Delete(ctx, claimBinding(winner, "late", "claim-late", "late")); err != nil {
		t.Fatal(err)
	}
	eventually(t, 20*time.Second, "the other Binding takes the claim once the holder is gone", func() error {
		b := &workerv1.KVCachePoolBinding{}
		if err := stack.Client.Get(ctx, client.ObjectKey{Namespace: loser, Name: "late"}, b); err != nil {
			return err
		}
		if c := meta.FindStatusCondition(b.Status.Conditions, workerv1.BindingDomainClaimed); c == nil || c.Status != metav1.ConditionTrue {
			return fmt.Errorf("%v", c)
		}
		return nil
	})
}
