package v1alpha1

import xpv2 "github.com/crossplane/crossplane/apis/v2/core/v2"

// PodsCreated says whether the API server accepted the Pods the members controller creates: written
// on each ModelReplica by the controller, aggregated on its ModelRole by the role step and on the
// ModelDeployment by the deployment step. A refused create (Pod Security, a ResourceQuota, a
// LimitRange, a webhook) otherwise leaves a deployment without Pods and nothing where its user looks.
const (
	PodsCreatedConditionType xpv2.ConditionType = "PodsCreated"
	// PodsCreatedReason is True's: every create was accepted.
	PodsCreatedReason xpv2.ConditionReason = "Created"
	// PodRefusedReason is False's, and the Warning event's: the API server refused a create; the
	// message is the API server's own.
	PodRefusedReason xpv2.ConditionReason = "PodRefused"
)
