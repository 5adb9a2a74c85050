package cluster

import "testing"

// TestRoutesTo: an address kube-proxy translates to is routed; the name of an emptied endpoint chain
// and a longer address sharing its prefix are not.
func TestRoutesTo(t *testing.T) {
	const ruleset = `table ip kube-proxy {
	chain endpoint-2QXKJ5JN-mdplane-system/mdplane-webhook/tcp/https__10.244.0.5/9443 {
	}
	chain endpoint-ABCDEF12-mdplane-system/mdplane-webhook/tcp/https__10.244.0.50/9443 {
		ip saddr 10.244.0.50 jump mark-for-masquerade
		meta l4proto tcp dnat to 10.244.0.50:9443
	}
}`
	for ip, want := range map[string]bool{"10.244.0.50": true, "10.244.0.5": false, "10.244.0.7": false} {
		if got := routesTo(ruleset, ip); got != want {
			t.Errorf("routesTo(%s) = %v, want %v", ip, got, want)
		}
	}
}

// TestADeletedPodsBodiesAreForgotten: the exporter forgets every port of a deleted Pod's address,
// and only that address.
func TestADeletedPodsBodiesAreForgotten(t *testing.T) {
	e := &Exporter{}
	e.Set("10.245.0.5:8000", "busy")
	e.Set("10.245.0.5:9090", "busy")
	e.Set("10.245.0.50:8000", "busy")
	e.forgetPod("10.245.0.5")
	if len(e.bodies) != 1 || e.bodies["10.245.0.50:8000"] != "busy" {
		t.Errorf("bodies left: %v", e.bodies)
	}
}
