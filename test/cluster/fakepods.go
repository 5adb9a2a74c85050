package cluster

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
)

// fakePodsTable is the stack's nftables table that sends every TCP connection to a fake node's Pod
// to the exporter.
const fakePodsTable = "mdplane-fake-pods"

// serveFakePods stands in for the engines of the fake nodes' Pods, whose addresses (FakePodCIDR)
// lead nowhere: every TCP connection to one, from the real node's Pods (mdplane-controllers'
// scrapes, probes and drain reads) or from this machine, is translated to the exporter, which
// answers by the address the request names as its host.
func (s *Stack) serveFakePods(context.Context) error {
	s.MetricsExporter = &Exporter{Default: IdleGauges}
	lis, err := net.Listen("tcp", net.JoinHostPort(s.hostIP, "0"))
	if err != nil {
		return err
	}
	srv := &http.Server{Handler: s.MetricsExporter, ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = srv.Serve(lis) }()
	s.stops = append(s.stops, func() { _ = srv.Close() })
	if err := s.forgetDeletedPods(); err != nil {
		return err
	}
	to := lis.Addr().String()
	return nft(fmt.Sprintf(`table ip %[1]s {
	chain prerouting {
		type nat hook prerouting priority -100; policy accept;
		ip daddr %[2]s meta l4proto tcp dnat to %[3]s
	}
	chain output {
		type nat hook output priority -100; policy accept;
		ip daddr %[2]s meta l4proto tcp dnat to %[3]s
	}
}
`, fakePodsTable, FakePodCIDR, to))
}

// forgetDeletedPods makes the exporter forget a Pod's bodies once the Pod is deleted, until the
// stack stops.
func (s *Stack) forgetDeletedPods() error {
	clientset, err := kubernetes.NewForConfig(s.Config)
	if err != nil {
		return err
	}
	factory := informers.NewSharedInformerFactory(clientset, 0)
	informer := factory.Core().V1().Pods().Informer()
	if _, err := informer.AddEventHandler(cache.ResourceEventHandlerFuncs{
		DeleteFunc: func(obj any) {
			if gone, ok := obj.(cache.DeletedFinalStateUnknown); ok {
				obj = gone.Obj
			}
			if p, ok := obj.(*corev1.Pod); ok && p.Status.PodIP != "" {
				s.MetricsExporter.forgetPod(p.Status.PodIP, heldSince(informer.GetStore().List(), p))
			}
		},
	}); err != nil {
		return err
	}
	stop := make(chan struct{})
	factory.Start(stop)
	s.stops = append(s.stops, func() { close(stop); factory.Shutdown() })
	return nil
}

// heldSince is when the Pod now holding a deleted Pod's IP started (its start time, else its
// creation, each to the second, so rounded down), or zero when no other Pod holds it.
func heldSince(pods []any, deleted *corev1.Pod) time.Time {
	var since time.Time
	for _, obj := range pods {
		p, ok := obj.(*corev1.Pod)
		if !ok || p.UID == deleted.UID || p.Status.PodIP != deleted.Status.PodIP {
			continue
		}
		started := p.CreationTimestamp.Time
		if p.Status.StartTime != nil {
			started = p.Status.StartTime.Time
		}
		if since.IsZero() || started.Before(since) {
			since = started
		}
	}
	return since
}
