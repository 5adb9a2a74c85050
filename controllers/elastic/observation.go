package elastic

import (
	"fmt"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/utils/ptr"

	"github.com/mdplane/mdplane/apis/composite/v1alpha1"
	workerv1 "github.com/mdplane/mdplane/apis/worker/v1"
	renderroles "github.com/mdplane/mdplane/functions/render-roles"
)

// Layer is one layer of the observation document, its keys spelled as §1.7 writes them.
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
	// State is the resize operation's state; mdplane sends no resize, so it records none.
	State string `json:"state"`
	// Reason is the current hold, in words.
	Reason string `json:"reason"`
	// StableWidth is the last proven width; mdplane proves none, so it stays 0.
	StableWidth int `json:"stableWidth"`
}

// The reasons of the layers mdplane cannot read: it has no device ledger, no view of the Ray cluster
// and sends no request to the engine.
const (
	AllocatedUnknown = "mdplane keeps no device ledger: a member's whole-GPU allocation is not verified beyond its Kueue admission"
	RayUnknown       = "mdplane does not read the Ray cluster: the members' registration with the head is not observed"
	EffectiveUnknown = "mdplane sends no request to the engine: the width it runs is not proven"
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
// (the members controller reports each one's admission) and the role's Pods.
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
	boot := ""
	for _, p := range pods {
		if p.DeletionTimestamp == nil && p.Labels[workerv1.LabelPodOrdinal] == "0" {
			o.MasterUID, boot = string(p.UID), p.Annotations[renderroles.AnnotationElasticBootWidth]
		}
	}
	switch {
	case o.MasterUID == "":
		o.Reason = "the master (ordinal 0) has no Pod yet"
	case admitted < width:
		o.Reason = fmt.Sprintf("%d of %d members are admitted", admitted, width)
	case boot != "" && boot != fmt.Sprint(width):
		o.Reason = fmt.Sprintf("the master booted at width %s and the spec asks %d: mdplane sends no native resize (POST /scale_elastic_ep) in this release, so the new members join Ray but the engine does not use them", boot, width)
	}
	return o
}
