package snapshot

import (
	"fmt"
	"io"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
)

// Families are one Pod's parsed /metrics, by family name.
type Families map[string]*dto.MetricFamily

// Parse reads the Prometheus text exposition format. Metric names may carry colons (vllm:..., sglang:...).
func Parse(r io.Reader) (Families, error) {
	p := expfmt.NewTextParser(model.UTF8Validation)
	f, err := p.TextToMetricFamilies(r)
	if err != nil {
		return nil, fmt.Errorf("parsing the metrics text: %w", err)
	}
	return f, nil
}

// value is a sample's value whatever the family's type (gauge, counter or untyped).
func value(m *dto.Metric) float64 {
	switch {
	case m.GetGauge() != nil:
		return m.GetGauge().GetValue()
	case m.GetCounter() != nil:
		return m.GetCounter().GetValue()
	default:
		return m.GetUntyped().GetValue()
	}
}

// Sum is the sum of every series of the first of names present, keeping only those keep accepts
// (nil keeps all); false when no name is present. Counter names are tried as given and with _total.
func (f Families) Sum(keep func(labels map[string]string) bool, names ...string) (float64, bool) {
	for _, name := range names {
		mf, ok := f[name]
		if !ok {
			continue
		}
		sum, any := 0.0, false
		for _, m := range mf.GetMetric() {
			if keep != nil && !keep(labelsOf(m)) {
				continue
			}
			sum += value(m)
			any = true
		}
		return sum, any
	}
	return 0, false
}

// Histogram is the summed observation count and sum of a histogram family, typed or written as
// untyped _count and _sum series.
func (f Families) Histogram(name string) (count, sum float64, ok bool) {
	if mf, found := f[name]; found && mf.GetType() == dto.MetricType_HISTOGRAM {
		for _, m := range mf.GetMetric() {
			count += float64(m.GetHistogram().GetSampleCount())
			sum += m.GetHistogram().GetSampleSum()
		}
		return count, sum, len(mf.GetMetric()) > 0
	}
	c, okc := f.Sum(nil, name+"_count")
	s, oks := f.Sum(nil, name+"_sum")
	return c, s, okc && oks
}

func labelsOf(m *dto.Metric) map[string]string {
	l := make(map[string]string, len(m.GetLabel()))
	for _, p := range m.GetLabel() {
		l[p.GetName()] = p.GetValue()
	}
	return l
}
