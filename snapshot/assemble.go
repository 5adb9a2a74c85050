package snapshot

import (
	"cmp"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	metricsv1 "github.com/mdplane/mdplane/apis/metrics/v1"
	workerv1 "github.com/mdplane/mdplane/apis/worker/v1"
)

// Reasons of missing entries. The first block sets partial; the
// second does not: it describes what the Pod legitimately does not export.
const (
	ReasonAbsent              = "metric is absent"
	ReasonAwaitingSample      = "awaiting a second counter sample"
	ReasonCounterReset        = "counter reset"
	ReasonCacheReset          = "counter reset or incompatible denominator"
	ReasonNoQueries           = "no queries in the sampling window"
	ReasonNoObservations      = "no observations in the sampling window"
	SourceScrape              = "scrape"
	SourceCacheCounters       = "cache-hit counters"
	ReasonIdle                = "idle sampling window"
	ReasonCounterNotExported  = "labeled counter not yet exported beside its read pair"
	ReasonHistogramNotExport  = "labeled histogram not yet exported beside an idle pair"
	ReasonExternalCacheAbsent = "external prefix cache is not in use on this Pod"
	ReasonTierNotBuilt        = "cache tier is not built by this Pod"
)

// notPartial are the reasons that leave the snapshot whole.
var notPartial = map[string]bool{ReasonIdle: true, ReasonCounterNotExported: true, ReasonHistogramNotExport: true,
	ReasonExternalCacheAbsent: true, ReasonTierNotBuilt: true}

// Read is one Pod's scrape: its families, or why it could not be read.
type Read struct {
	Target   Target
	Families Families
	// Err is the scrape's reason, written as a missing entry with source scrape.
	Err string
	At  time.Time
}

// Assemble builds the snapshot of md from its selection and the reads of the selected Pods, and
// returns the samples the next call compares with: prev, pruned, with this call's reads.
func Assemble(md *workerv1.ModelDeployment, sel Selection, reads []Read, prev Samples, now time.Time) (*metricsv1.ModelDeploymentMetrics, Samples) {
	a := assembly{md: md, samples: prev.clone(now), gauges: map[string]int{},
		out: &metricsv1.ModelDeploymentMetrics{
			TypeMeta:   metav1.TypeMeta{APIVersion: metricsv1.SchemeGroupVersion.String(), Kind: metricsv1.Kind},
			ObjectMeta: metav1.ObjectMeta{Name: md.Name, Namespace: md.Namespace},
			Timestamp:  metav1.NewTime(now),
			Missing:    slices.Clone(sel.Missing),
		}}
	for _, r := range reads {
		if r.Err != "" {
			a.miss(r.Target.Pod, SourceScrape, r.Err)
			continue
		}
		a.read(r)
	}
	m := a.out
	byNameScope := func(x, y metricsv1.Gauge) int {
		return cmp.Or(cmp.Compare(x.Name, y.Name), cmp.Compare(x.Scope, y.Scope))
	}
	byPodName := func(x, y metricsv1.Window) int { return cmp.Or(cmp.Compare(x.Pod, y.Pod), cmp.Compare(x.Name, y.Name)) }
	slices.SortStableFunc(m.Processing, byNameScope)
	slices.SortStableFunc(m.Queueing, byNameScope)
	slices.SortStableFunc(m.Latency, byPodName)
	slices.SortStableFunc(m.Traffic, byPodName)
	slices.SortStableFunc(m.Transfer, byPodName)
	slices.SortStableFunc(m.CacheHits, func(x, y metricsv1.CacheHit) int {
		return cmp.Or(cmp.Compare(x.Pod, y.Pod), cmp.Compare(x.Scope, y.Scope))
	})
	slices.SortStableFunc(m.Missing, func(x, y metricsv1.Missing) int {
		return cmp.Or(cmp.Compare(x.Pod, y.Pod), cmp.Compare(x.Source, y.Source))
	})
	m.Partial = sel.Partial
	for _, miss := range m.Missing {
		m.Partial = m.Partial || !notPartial[miss.Reason]
	}
	return m, a.samples
}

// assembly is one Assemble call's state.
type assembly struct {
	md      *workerv1.ModelDeployment
	samples Samples
	out     *metricsv1.ModelDeploymentMetrics
	// gauges index the summed gauges by list, name, source and scope.
	gauges map[string]int
}

func (a *assembly) miss(pod *corev1.Pod, source, reason string) {
	a.out.Missing = append(a.out.Missing, metricsv1.Missing{Pod: pod.Name, Source: source, Reason: reason})
}

// read adds one Pod's gauges, windows and cache hits.
func (a *assembly) read(r Read) {
	at := metav1.NewTime(r.At)
	for _, g := range gaugesOf(a.md, r.Target) {
		v, ok := r.Families.Sum(nil, g.source)
		if !ok {
			a.miss(r.Target.Pod, g.source, ReasonAbsent)
			continue
		}
		a.addGauge(g, r.Target.Scope, v, at)
	}
	idle := a.windows(r, at)
	a.cacheHits(r, at, idle)
}

func (a *assembly) addGauge(g gaugeSpec, scope string, v float64, at metav1.Time) {
	list := &a.out.Processing
	if g.list == queueing {
		list = &a.out.Queueing
	}
	key := strings.Join([]string{string(rune('0' + g.list)), g.name, g.source, scope}, "\x00")
	i, ok := a.gauges[key]
	if !ok {
		*list = append(*list, metricsv1.Gauge{Name: g.name, Source: g.source, Scope: scope, Unit: g.unit, ObservedAt: at})
		i = len(*list) - 1
		a.gauges[key] = i
	}
	e := &(*list)[i]
	e.Value += v
	e.PodCount++
	if at.After(e.ObservedAt.Time) {
		e.ObservedAt = at
	}
}

// windows adds a Pod's windows and reports whether its TTFT recorded nothing in the window.
func (a *assembly) windows(r Read, at metav1.Time) (idle bool) {
	pod := r.Target.Pod
	made := map[string]metricsv1.Window{}
	// ttftState is "" before TTFT is read, else idle, absent or busy.
	ttftState := ""
	for _, w := range windowsOf(a.md, r.Target) {
		cur, present := readSeries(r.Families, w)
		cur.At = r.At
		if !present {
			a.miss(pod, w.source, absentReason(r.Families, w, ttftState))
			if w.name == ttft {
				ttftState = "absent"
			}
			continue
		}
		dA, dB, seconds, reason := a.samples.delta(sampleKey(a.md.UID, pod.UID, w.source), cur)
		if reason == "" && (dA < 0 || dB < 0) {
			reason = ReasonCounterReset
		}
		if reason == "" && w.kind == mean && dA == 0 {
			reason = ReasonNoObservations
			if w.name == ttft {
				ttftState = "idle"
			}
			if ttftState == "idle" && w.list == latency {
				reason = ReasonIdle
			}
		}
		if reason != "" {
			a.miss(pod, w.source, reason)
			continue
		}
		if w.name == ttft {
			ttftState = "busy"
		}
		e := metricsv1.Window{Name: w.name, Pod: pod.Name, Source: w.source, Scope: r.Target.Scope, Unit: w.unit,
			Samples: dA, WindowSeconds: seconds, ObservedAt: at}
		if w.kind == mean {
			e.Value = dB / dA
		} else {
			e.Value = dA / seconds
		}
		made[w.name] = e
		a.appendWindow(w.list, e)
	}
	a.errorRatio(made, r, at)
	return ttftState == "idle"
}

// readSeries is a window's series in one read: a histogram's count and sum or a counter's count.
func readSeries(f Families, w windowSpec) (cur Sample, present bool) {
	if w.kind == mean {
		cur.A, cur.B, present = f.Histogram(w.source)
		return cur, present
	}
	for _, n := range counterNames(w.source) {
		if cur.A, present = f.Sum(w.keep, n); present {
			break
		}
	}
	return cur, present
}

// absentReason is why a window's series is absent: a labeled series not yet exported, or absent.
func absentReason(f Families, w windowSpec, ttftState string) string {
	if _, pairPresent := f.Sum(nil, counterNames(w.pair)...); w.pair != "" && pairPresent {
		return ReasonCounterNotExported
	}
	if w.kind == mean && w.name != ttft && ttftState == "idle" {
		return ReasonHistogramNotExport
	}
	return ReasonAbsent
}

// errorRatio divides a router's errors by its requests when both windows span the same reads.
func (a *assembly) errorRatio(made map[string]metricsv1.Window, r Read, at metav1.Time) {
	req, okR := made[errorRatio.requests]
	errs, okE := made[errorRatio.errors]
	if !okR || !okE || req.WindowSeconds != errs.WindowSeconds || req.Samples <= 0 || errs.Samples > req.Samples {
		return
	}
	a.appendWindow(traffic, metricsv1.Window{Name: "error-ratio", Pod: req.Pod, Source: req.Source + "+" + errs.Source,
		Scope: r.Target.Scope, Unit: "fraction", Value: errs.Samples / req.Samples, Samples: req.Samples,
		WindowSeconds: req.WindowSeconds, ObservedAt: at})
}

func (a *assembly) appendWindow(l list, w metricsv1.Window) {
	switch l {
	case latency:
		a.out.Latency = append(a.out.Latency, w)
	case traffic:
		a.out.Traffic = append(a.out.Traffic, w)
	case transfer:
		a.out.Transfer = append(a.out.Transfer, w)
	}
}

// Why a snapshot cannot be served at all (HTTP 503).
const (
	ReasonNoOwnedPods = "ModelDeployment has no owned metrics Pods"
	reasonUnreadable  = "all ModelDeployment metrics Pods are unreadable: "
)

// Unavailable is the reason no snapshot can be served: no owned Pod, or none readable (with the
// first Pod's error, by name); false when some Pod was read.
func Unavailable(sel Selection, reads []Read) (string, bool) {
	if len(sel.Targets) == 0 {
		return ReasonNoOwnedPods, true
	}
	for _, r := range reads {
		if r.Err == "" {
			return "", false
		}
	}
	return reasonUnreadable + reads[0].Err, true
}
