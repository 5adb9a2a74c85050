// Package envoy checks that the Envoy bootstrap mdplane renders for llm-d-router is one Envoy loads:
// it is decoded strictly into Envoy's published v3 protobuf types, every typed_config resolved
// through the registered extension types, so a misspelled field or an unknown @type fails here
// rather than in a crash-looping router Pod. It lives in the test module so the product module does
// not depend on go-control-plane.
package envoy

import (
	"strings"
	"testing"

	bootstrapv3 "github.com/envoyproxy/go-control-plane/envoy/config/bootstrap/v3"
	"google.golang.org/protobuf/encoding/protojson"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/yaml"

	// The extensions envoy.yaml names by @type; importing them registers their types.
	_ "github.com/envoyproxy/go-control-plane/envoy/extensions/access_loggers/stream/v3"
	_ "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/ext_proc/v3"
	_ "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/header_mutation/v3"
	_ "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/router/v3"
	_ "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/http_connection_manager/v3"
	_ "github.com/envoyproxy/go-control-plane/envoy/extensions/upstreams/http/v3"

	"github.com/mdplane/mdplane/functions/kv-cache/routers"
	"github.com/mdplane/mdplane/functions/kv-cache/routers/llmd"
)

// load decodes an envoy.yaml as Envoy's bootstrap does: strictly, and validated by the
// protoc-gen-validate rules the types carry.
func load(doc string) (*bootstrapv3.Bootstrap, error) {
	js, err := yaml.YAMLToJSON([]byte(doc))
	if err != nil {
		return nil, err
	}
	b := &bootstrapv3.Bootstrap{}
	if err := (protojson.UnmarshalOptions{DiscardUnknown: false}).Unmarshal(js, b); err != nil {
		return nil, err
	}
	if err := b.ValidateAll(); err != nil {
		return nil, err
	}
	return b, nil
}

func TestEnvoyLoadsTheRenderedBootstrap(t *testing.T) {
	cases := []struct {
		rule    string
		timeout *int32
	}{
		{"the default one-day route timeout", nil},
		{"a requestTimeoutSeconds route timeout", ptr.To(int32(60))},
	}
	for _, tc := range cases {
		t.Run(tc.rule, func(t *testing.T) {
			b, err := load(llmd.Envoy(tc.timeout))
			if err != nil {
				t.Fatalf("Envoy would refuse the rendered envoy.yaml: %v", err)
			}
			if n := len(b.GetStaticResources().GetListeners()); n != 1 {
				t.Errorf("listeners = %d, want 1", n)
			}
			if n := len(b.GetStaticResources().GetClusters()); n != 2 {
				t.Fatalf("clusters = %d, want 2", n)
			}
			// The ports are literals of the template; the Deployment and Service are rendered from constants.
			listen := b.GetStaticResources().GetListeners()[0].GetAddress().GetSocketAddress().GetPortValue()
			if listen != routers.Port {
				t.Errorf("Envoy listens on %d, the router Service targets %d", listen, routers.Port)
			}
			extProc := b.GetStaticResources().GetClusters()[1].GetLoadAssignment().GetEndpoints()[0].GetLbEndpoints()[0].GetEndpoint().GetAddress().GetSocketAddress().GetPortValue()
			if extProc != llmd.ExtProcPort {
				t.Errorf("Envoy dials ext_proc on %d, the EPP's grpc port is %d", extProc, llmd.ExtProcPort)
			}
		})
	}
}

// TestStrictDecodingRefusesNearMisses shows the check has teeth: each near-miss of the rendered
// document is refused.
func TestStrictDecodingRefusesNearMisses(t *testing.T) {
	doc := llmd.Envoy(nil)
	cases := []struct {
		rule     string
		from, to string
	}{
		{"a misspelled field of HttpConnectionManager", "stat_prefix: router", "stat_prefx: router"},
		{"request_headers_to_remove, which HttpConnectionManager does not have", "stat_prefix: router", "stat_prefix: router\n          request_headers_to_remove: [x-gateway-destination-endpoint]"},
		{"an unregistered typed_config type", "ext_proc.v3.ExternalProcessor", "ext_proc.v3.ExternalProcesser"},
		{"an unknown enum value", "request_trailer_mode: SEND", "request_trailer_mode: SENT"},
		{"a misspelled cluster field", "lb_policy: CLUSTER_PROVIDED", "lb_polcy: CLUSTER_PROVIDED"},
	}
	for _, tc := range cases {
		t.Run(tc.rule, func(t *testing.T) {
			if !strings.Contains(doc, tc.from) {
				t.Fatalf("the rendered envoy.yaml has no %q", tc.from)
			}
			if _, err := load(strings.Replace(doc, tc.from, tc.to, 1)); err == nil {
				t.Errorf("accepted %s", tc.rule)
			}
		})
	}
}
