package elastic

import (
	"fmt"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/utils/ptr"

	"github.com/mdplane/mdplane/apis/composite/v1alpha1"
	workerv1 "github.com/mdplane/mdplane/apis/worker/v1"
)

// Layer is one layer of the observation document, its keys spelled as the engine's observer writes
// them.
type Layer struct {
	Known  bool   `json:"Known"`
	Value  int    `json:"Value"`
	Reason string `json:"Reason"`
}

// Observation is the document under observation.json.
type Observation struct {
	DeploymentUID      string `json:"deploymentUID"`
	ObservedGeneration int64  `json:"observedGeneration"`
	MasterUID          string `json:"masterUID"`
	Desired            Layer  `json:"desired"`
	Admitted           Layer  `json:"admitted"`
	Allocated          Layer  `json:"allocated"`
	Ray                Layer  `json:"ray"`
	Effective          Layer  `json:"effective"`
	// State is the operation record's state, empty without one.
	State string `json:"state"`
	// Reason is the current hold, in words.
	Reason string `json:"reason"`
	// StableWidth is the data-parallel size the engine last stood at: its boot width, or the target
	// of a resize it answered as applied; 0 while unknown (a resize in flight or its answer lost).
	StableWidth int `json:"stableWidth"`
}

// The reasons of the layers mdplane cannot read: it has no device ledger, no view of the Ray cluster
// and sends no forward to each rank.
const (
	AllocatedUnknown = "mdplane keeps no device ledger: a member's whole-GPU allocation is not verified beyond its Kueue admission"
	RayUnknown       = "mdplane does not read the Ray cluster: the members' registration with the head is not observed"
	EffectiveUnknown = "mdplane sends no forward to each rank: the width the engine runs is not proven beyond its answer to the resize (stableWidth)"
)

// RoleOf is the deployment's role carrying elasticEp, nil without one.
func RoleOf(md *workerv1.ModelDeployment) *workerv1.ModelDeploymentRole {
	for i := range md.Spec.Roles {
		if md.Spec.Roles[i].ElasticEP != nil {
			return &md.Spec.Roles[i]
		}
	}
	return nil
}

// Observe is the observation document of an elastic deployment from its role's standing replicas
// (each one's admission as its group's Workload has it, else as the members controller reported
// it) and the role's Pods.
func Observe(md *workerv1.ModelDeployment, role *workerv1.ModelDeploymentRole, replicas []v1alpha1.ModelReplica, pods []corev1.Pod) Observation {
	width := int(role.ElasticEP.Width)
	o := Observation{
		DeploymentUID: string(md.UID), ObservedGeneration: md.Generation,
		Desired:   Layer{Known: true, Value: width},
		Allocated: Layer{Reason: AllocatedUnknown}, Ray: Layer{Reason: RayUnknown}, Effective: Layer{Reason: EffectiveUnknown},
	}
	admitted := 0
	for _, r := range replicas {
		if r.DeletionTimestamp == nil && int(r.Spec.Ordinal) < width && ptr.Deref(r.Status.Admitted, false) {
			admitted++
		}
	}
	o.Admitted = Layer{Known: true, Value: admitted}
	for _, p := range pods {
		if p.DeletionTimestamp == nil && p.Labels[workerv1.LabelPodOrdinal] == "0" {
			o.MasterUID = string(p.UID)
		}
	}
	switch {
	case o.MasterUID == "":
		o.Reason = "the master (ordinal 0) has no Pod yet"
	case admitted < width:
		o.Reason = fmt.Sprintf("%d of %d members are admitted", admitted, width)
	}
	return o
}

// overlay adds a resize pass's outcome: the record's state, the engine's width and the hold.
func (o *Observation) overlay(d deployment, res passResult) {
	if res.rec != nil {
		o.State = res.rec.State
	}
	if d.master != nil {
		o.StableWidth = engineWidth(d.master, res.rec)
	}
	if res.hold != "" {
		o.Reason = res.hold
	}
}
