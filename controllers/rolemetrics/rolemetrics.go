package rolemetrics

import (
	"context"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/metrics"

	"github.com/mdplane/mdplane/apis/composite/v1alpha1"
	"github.com/mdplane/mdplane/internal/replicas"
)

// The histograms, observed by the controllers where the transition happens.
var (
	timeToAdmitted = prometheus.NewHistogram(prometheus.HistogramOpts{
		Name:    "mdplane_replica_time_to_admitted_seconds",
		Help:    "Time from a replica's creation to its group's Workload being admitted by Kueue, as the replica first reports it.",
		Buckets: prometheus.ExponentialBuckets(0.5, 2, 14), // 0.5 s to about 68 min
	})
	timeToReady = prometheus.NewHistogram(prometheus.HistogramOpts{
		Name:    "mdplane_replica_time_to_ready_seconds",
		Help:    "Time from a replica's creation to every one of its members being Ready, as the replica first reports it.",
		Buckets: prometheus.ExponentialBuckets(1, 2, 14), // 1 s to about 2.3 h
	})
	rolloutStep = prometheus.NewHistogram(prometheus.HistogramOpts{
		Name:    "mdplane_rollout_step_seconds",
		Help:    "Time a role spends replacing one replica during a rollout, from the replacement's start to the next one's or the rollout's end.",
		Buckets: prometheus.ExponentialBuckets(1, 2, 14),
	})
)

func init() {
	metrics.Registry.MustRegister(timeToAdmitted, timeToReady, rolloutStep)
}

// ObserveReplicaReport records the transitions a replica's report makes: its first admission and
// its first Ready, each timed from the replica's creation.
func ObserveReplicaReport(created time.Time, was, is v1alpha1.ModelReplicaStatus, now time.Time) {
	if !ptr.Deref(was.Admitted, false) && ptr.Deref(is.Admitted, false) {
		timeToAdmitted.Observe(now.Sub(created).Seconds())
	}
	if !was.Ready() && is.Ready() {
		timeToReady.Observe(now.Sub(created).Seconds())
	}
}

// ObserveRolloutStep records one replacement of a rollout, begun at started.
func ObserveRolloutStep(started, now time.Time) {
	rolloutStep.Observe(now.Sub(started).Seconds())
}

// Row is one role's gauges.
type Row struct {
	Namespace, Deployment, Role string
	// Declared is the role's replica count; Standing its replicas not being deleted, of which
	// Parked have their Workload parked by the joint admission check.
	Declared, Standing, Parked int
	// Ready, UpToDate and QuotaReserved are the role's reported counts.
	Ready, UpToDate, QuotaReserved int
	// Replacing and Retiring are 1 while the role replaces or retires a replica.
	Replacing, Retiring int
}

// Rows are the gauges of every role, in the order of the roles given, from the roles and the
// replicas of every role.
func Rows(roles []v1alpha1.ModelRole, all []v1alpha1.ModelReplica) []Row {
	type key struct{ namespace, deployment, role string }
	standing, parked := map[key]int{}, map[key]int{}
	for _, r := range all {
		if r.DeletionTimestamp != nil {
			continue
		}
		k := key{r.Namespace, r.Spec.DeploymentName, r.Spec.RoleName}
		standing[k]++
		if r.Status.Quota == replicas.QuotaParked {
			parked[k]++
		}
	}
	rows := make([]Row, 0, len(roles))
	for _, role := range roles {
		k := key{role.Namespace, role.Spec.DeploymentName, role.Spec.RoleName}
		row := Row{Namespace: k.namespace, Deployment: k.deployment, Role: k.role, Declared: int(role.Spec.Replicas),
			Standing: standing[k], Parked: parked[k], Ready: int(ptr.Deref(role.Status.Ready, 0)),
			UpToDate: int(ptr.Deref(role.Status.UpToDate, 0)), QuotaReserved: int(ptr.Deref(role.Status.QuotaReserved, 0))}
		if role.Status.Replacement != nil && !role.Status.Replacement.None() {
			row.Replacing = 1
		}
		if role.Status.Retirement != nil {
			row.Retiring = 1
		}
		rows = append(rows, row)
	}
	return rows
}

var labels = []string{"namespace", "deployment", "role"}

// gauges are the per-role gauges, each with how a Row gives its value.
var gauges = []struct {
	desc  *prometheus.Desc
	value func(Row) int
}{
	{prometheus.NewDesc("mdplane_role_replicas_declared", "Replicas the role declares.", labels, nil), func(r Row) int { return r.Declared }},
	{prometheus.NewDesc("mdplane_role_replicas_standing", "Replicas of the role that exist and are not being deleted.", labels, nil), func(r Row) int { return r.Standing }},
	{prometheus.NewDesc("mdplane_role_replicas_ready", "Replicas of the role whose every member is Ready.", labels, nil), func(r Row) int { return r.Ready }},
	{prometheus.NewDesc("mdplane_role_replicas_up_to_date", "Replicas of the role running its current configuration.", labels, nil), func(r Row) int { return r.UpToDate }},
	{prometheus.NewDesc("mdplane_role_replicas_quota_reserved", "Replicas of the role whose Workload holds a quota reservation.", labels, nil), func(r Row) int { return r.QuotaReserved }},
	{prometheus.NewDesc("mdplane_role_replicas_parked", "Replicas of the role whose Workload the joint admission check parked.", labels, nil), func(r Row) int { return r.Parked }},
	{prometheus.NewDesc("mdplane_role_replacements_in_flight", "1 while the role's rollout replaces a replica.", labels, nil), func(r Row) int { return r.Replacing }},
	{prometheus.NewDesc("mdplane_role_retirements_in_flight", "1 while the role retires a replica (a scale-down's drain).", labels, nil), func(r Row) int { return r.Retiring }},
}

// Collector exports the gauges of every role, read from Reader (the controllers' cache) at each
// scrape. The elected replica alone registers it (where the controllers are set up), so a
// Prometheus scraping every replica counts each role once.
type Collector struct {
	Reader client.Reader
	// Timeout bounds the cache reads of one scrape.
	Timeout time.Duration
}

// Describe sends the gauges' descriptions.
func (c *Collector) Describe(ch chan<- *prometheus.Desc) {
	for _, g := range gauges {
		ch <- g.desc
	}
}

// Collect sends the gauges of every role; nothing when the cache cannot be read.
func (c *Collector) Collect(ch chan<- prometheus.Metric) {
	ctx, cancel := context.WithTimeout(context.Background(), c.Timeout)
	defer cancel()
	roles, replicaList := &v1alpha1.ModelRoleList{}, &v1alpha1.ModelReplicaList{}
	if c.Reader.List(ctx, roles) != nil || c.Reader.List(ctx, replicaList) != nil {
		return
	}
	for _, row := range Rows(roles.Items, replicaList.Items) {
		values := []string{row.Namespace, row.Deployment, row.Role}
		for _, g := range gauges {
			ch <- prometheus.MustNewConstMetric(g.desc, prometheus.GaugeValue, float64(g.value(row)), values...)
		}
	}
}
