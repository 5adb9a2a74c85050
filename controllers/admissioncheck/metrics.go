package admissioncheck

import (
	"github.com/prometheus/client_golang/prometheus"
	"sigs.k8s.io/controller-runtime/pkg/metrics"
)

var (
	setsAdmitted = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "mdplane_joint_admission_sets_admitted_total",
		Help: "Replica sets whose groups all held quota and were released together.",
	})
	setsParked = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "mdplane_joint_admission_sets_parked_total",
		Help: "Replica sets deactivated after holding part of their quota past the park time.",
	})
	admissionWait = prometheus.NewHistogram(prometheus.HistogramOpts{
		Name:    "mdplane_joint_admission_wait_seconds",
		Help:    "Time from a set's first quota reservation to the whole set's admission.",
		Buckets: prometheus.ExponentialBuckets(0.5, 2, 14), // 0.5 s to about 68 min
	})
)

func init() {
	metrics.Registry.MustRegister(setsAdmitted, setsParked, admissionWait)
}
