package main

import (
	"context"
	"flag"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

func TestTheControllersWaitForEveryCompositeKind(t *testing.T) {
	mapper := meta.NewDefaultRESTMapper(nil)
	for _, k := range compositeKinds[:2] {
		mapper.Add(k, meta.RESTScopeNamespace)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	if err := waitForKinds(ctx, mapper, compositeKinds); err == nil {
		t.Fatal("returned while ModelReplica is not served")
	}
	mapper.Add(compositeKinds[2], meta.RESTScopeNamespace)
	if err := waitForKinds(context.Background(), mapper, compositeKinds); err != nil {
		t.Fatalf("every kind is served: %v", err)
	}
	if len(compositeKinds) != 3 || compositeKinds[0] != (schema.GroupVersionKind{Group: "worker.gpustack.ai", Version: "v1", Kind: "ModelDeployment"}) {
		t.Fatalf("composite kinds: %v", compositeKinds)
	}
}

func TestAnIssuedCertificateNeedsItsNamespace(t *testing.T) {
	c := webhookCertificates()
	c.secret, c.service = "mdplane-webhook-cert", "mdplane-webhook"
	_, err := c.manage(nil, t.TempDir())
	if err == nil || !strings.Contains(err.Error(), "--webhook-cert-secret=mdplane-webhook-cert needs --namespace") {
		t.Fatalf("error = %v, want one naming the flag and the way out", err)
	}
	var api metricsAPI
	api.bindFlags(flag.NewFlagSet("mdplane-controllers", flag.ContinueOnError))
	api.addr, api.certs.secret = ":6443", "mdplane-api-cert"
	if err := api.add(nil, ""); err == nil || !strings.Contains(err.Error(), "--metrics-api-cert-secret=mdplane-api-cert needs --namespace") {
		t.Fatalf("error = %v, want one naming the API's flag", err)
	}
	ready, err := (&certificates{}).manage(nil, t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	select {
	case <-ready:
	default:
		t.Fatal("a provided certificate directory is ready at once")
	}
}

func TestTheMetricsSnapshotAPIIsOffUnlessItsAddressIsSet(t *testing.T) {
	var o options
	fs := flag.NewFlagSet("mdplane-controllers", flag.ContinueOnError)
	o.bindFlags(fs)
	if err := fs.Parse(nil); err != nil {
		t.Fatal(err)
	}
	if o.metricsAPI.addr != "" {
		t.Fatalf("defaults %+v: the webhooks Deployment runs the same binary and must not serve it", o.metricsAPI)
	}
	if err := o.metricsAPI.add(nil, ""); err != nil {
		t.Fatalf("an unset address adds nothing: %v", err)
	}
}

func TestTheStatusWritersAreOnUnlessTurnedOff(t *testing.T) {
	for _, row := range []struct {
		rule                     string
		args                     []string
		inventory, poolEndpoints bool
	}{
		{"on by default: nothing else writes an InstanceType's inventory or an external backend's endpoint", nil, true, true},
		{"the pool endpoints off where GPUStack's pool reconciler publishes them", []string{"--kv-cache-pool-endpoints=false"}, true, false},
		{"the inventory off where GPUStack's device discovery writes it", []string{"--instance-type-inventory=false"}, false, true},
	} {
		t.Run(row.rule, func(t *testing.T) {
			var o options
			fs := flag.NewFlagSet("mdplane-controllers", flag.ContinueOnError)
			o.bindFlags(fs)
			if err := fs.Parse(row.args); err != nil {
				t.Fatal(err)
			}
			if o.controllers.inventory != row.inventory || o.controllers.poolEndpoints != row.poolEndpoints {
				t.Fatalf("--instance-type-inventory = %t, --kv-cache-pool-endpoints = %t; want %t, %t",
					o.controllers.inventory, o.controllers.poolEndpoints, row.inventory, row.poolEndpoints)
			}
		})
	}
}
