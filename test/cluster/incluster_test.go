package cluster

import (
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

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
	chain service-ULMVA6XW-mdplane-system/mdplane-metrics-api/tcp/metrics-api {
		meta l4proto tcp dnat ip addr . port to numgen random mod 2 map { 0 : 10.244.0.8 . 6443, 1 : 10.244.0.9 . 6443 }
	}
}`
	for ip, want := range map[string]bool{"10.244.0.50": true, "10.244.0.5": false, "10.244.0.7": false, "10.244.0.8": true, "10.244.0.9": true, "10.244.0.80": false} {
		if got := routesTo(ruleset, ip); got != want {
			t.Errorf("routesTo(%s) = %v, want %v", ip, got, want)
		}
	}
}

// TestADeletedPodsBodiesAreForgotten: the exporter forgets every port of a deleted Pod's address,
// and only that address; a body set for the Pod that took the address over stays.
func TestADeletedPodsBodiesAreForgotten(t *testing.T) {
	e := &Exporter{}
	e.Set("10.245.0.5:8000", "busy")
	e.Set("10.245.0.5:9090", "busy")
	e.Set("10.245.0.50:8000", "busy")
	e.forgetPod("10.245.0.5", time.Time{})
	if len(e.bodies) != 1 || e.bodies["10.245.0.50:8000"].text != "busy" {
		t.Errorf("bodies left: %v", e.bodies)
	}

	e.Set("10.245.0.7:8000", "the deleted Pod's")
	takenOver := time.Now().Add(time.Millisecond)
	e.bodies["10.245.0.7:9090"] = body{text: "the next Pod's", set: takenOver}
	e.forgetPod("10.245.0.7", takenOver)
	if _, ok := e.bodies["10.245.0.7:8000"]; ok {
		t.Error("the deleted Pod's body stayed")
	}
	if e.bodies["10.245.0.7:9090"].text != "the next Pod's" {
		t.Errorf("the body set for the Pod now holding the address was forgotten: %v", e.bodies)
	}
}

// TestTheNextHolderOfAnAddressIsFound: heldSince is the start of the other Pod holding the deleted
// Pod's IP, and zero when none does.
func TestTheNextHolderOfAnAddressIsFound(t *testing.T) {
	started := metav1.NewTime(time.Date(2026, 12, 4, 10, 0, 0, 0, time.UTC))
	deleted := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{UID: "a"}, Status: corev1.PodStatus{PodIP: "10.245.0.7"}}
	next := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{UID: "b"}, Status: corev1.PodStatus{PodIP: "10.245.0.7", StartTime: &started}}
	other := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{UID: "c"}, Status: corev1.PodStatus{PodIP: "10.245.0.8", StartTime: &started}}
	if got := heldSince([]any{deleted, other}, deleted); !got.IsZero() {
		t.Errorf("no other holder: heldSince = %v, want zero", got)
	}
	if got := heldSince([]any{deleted, next, other}, deleted); !got.Equal(started.Time) {
		t.Errorf("heldSince = %v, want %v", got, started.Time)
	}
}
