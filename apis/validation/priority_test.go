package validation_test

import (
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/mdplane/mdplane/apis/validation"
	"github.com/mdplane/mdplane/apis/validation/refusaltest"
	workerv1 "github.com/mdplane/mdplane/apis/worker/v1"
)

// prioritized is a one-role deployment labelled with Kueue priority class pc ("" for no label).
func prioritized(pc string) *workerv1.ModelDeployment {
	return deployment(func(md *workerv1.ModelDeployment) {
		if pc != "" {
			md.Labels = map[string]string{workerv1.LabelPriorityClass: pc}
		}
	}, role("server", ""))
}

// TestPriorityClassRules: a deployment keeps the Kueue priority class it was created with, and a new
// one names a WorkloadPriorityClass that exists (when the cluster was read).
func TestPriorityClassRules(t *testing.T) {
	const path = "metadata.labels[kueue.x-k8s.io/priority-class]"
	classes := map[string]bool{"serving-high": true}
	cases := []struct {
		rule       string
		md, stored *workerv1.ModelDeployment
		cluster    validation.Cluster
		parts      []string // nil: admitted
	}{
		{rule: "a new deployment naming a class that does not exist",
			md: prioritized("serving-hgh"), cluster: validation.Cluster{PriorityClasses: classes},
			parts: []string{`"serving-hgh"`, `no Kueue WorkloadPriorityClass "serving-hgh" exists`, "remove the label for the default priority"}},
		{rule: "near miss: a new deployment naming a class that exists",
			md: prioritized("serving-high"), cluster: validation.Cluster{PriorityClasses: classes}},
		{rule: "near miss: offline, no class was read and any name is admitted",
			md: prioritized("serving-hgh")},
		{rule: "near miss: a new deployment without the label",
			md: prioritized(""), cluster: validation.Cluster{PriorityClasses: classes}},
		{rule: "an edit changing the class",
			md: prioritized("batch-low"), stored: prioritized("serving-high"),
			parts: []string{`"batch-low"`, "keeps the priority class it was created with", `put back "serving-high"`, "delete and recreate"}},
		{rule: "an edit adding the class",
			md: prioritized("serving-high"), stored: prioritized(""), parts: []string{"remove it, or delete and recreate"}},
		{rule: "an edit removing the class",
			md: prioritized(""), stored: prioritized("serving-high"), parts: []string{`Invalid value: ""`, `put back "serving-high"`}},
		{rule: "near miss: an edit keeping the class, even one no longer defined",
			md: prioritized("retired"), stored: prioritized("retired"), cluster: validation.Cluster{PriorityClasses: classes}},
	}
	for _, tc := range cases {
		t.Run(tc.rule, func(t *testing.T) {
			errs := refusaltest.Checked(t, validation.ValidateCreate(tc.md, tc.cluster))
			if tc.stored != nil {
				errs = refusaltest.Checked(t, validation.ValidateUpdate(tc.md, tc.stored, tc.cluster))
			}
			if tc.parts == nil {
				assert.Empty(t, errs)
				return
			}
			refused(t, errs, path, tc.parts...)
		})
	}
}
