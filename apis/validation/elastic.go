package validation

import (
	"fmt"

	"k8s.io/apimachinery/pkg/api/equality"
	k8svalidation "k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/mdplane/mdplane/apis/engine"
	"github.com/mdplane/mdplane/apis/naming"
	workerv1 "github.com/mdplane/mdplane/apis/worker/v1"
)

// The Elastic EP refusals, of the API's variant of the profile: a headInstanceType, the
// tensor-parallel size read from extraArgs and frozen after create.
const (
	// ElasticScaleDownMessage is the width-decrease refusal, verbatim.
	ElasticScaleDownMessage = "elastic-EP scale-down is not supported in this release; keep width unchanged or increase it"
	// ElasticFrozenMessage is the schema rule's message: its resources half is judged here.
	ElasticFrozenMessage = "on a role carrying elasticEp, size, instanceType, resources and command are frozen: the profile admits one fixed member configuration and width is its only setting"
)

// elasticOwnedMessage is the refusal of a flag or variable the elastic renderer writes.
func elasticOwnedMessage(name string) string {
	return name + " is written by the elastic renderer itself"
}

// validateElastic judges the roles carrying elasticEp; stored is the role as stored, had whether
// there is one (an update).
func validateElastic(md *workerv1.ModelDeployment, role, stored workerv1.ModelDeploymentRole, had bool, path *field.Path, c Cluster) field.ErrorList {
	ep := role.ElasticEP
	if ep == nil {
		return nil
	}
	var errs field.ErrorList
	if md.Spec.Engine.Name != workerv1.EngineVLLM {
		errs = append(errs, field.Invalid(field.NewPath("spec", "engine", "name"), md.Spec.Engine.Name,
			"Elastic EP runs on vLLM only (its Ray data-parallel backend and native resize); set spec.engine.name to vLLM or remove elasticEp"))
	}
	if len(md.Spec.Roles) != 1 {
		errs = append(errs, field.Forbidden(field.NewPath("spec", "roles"), fmt.Sprintf(
			"role %q carries elasticEp, which must be the deployment's only role; declare the other roles in another deployment", role.Name)))
	}
	if head := naming.ElasticHeadName(md.Name); len(k8svalidation.IsDNS1035Label(head)) > 0 {
		errs = append(errs, field.Invalid(field.NewPath("metadata", "name"), md.Name, fmt.Sprintf(
			"the Ray head's Service and role would be named %q (%d characters), which is not a DNS-1035 label of at most 63; shorten the deployment name",
			head, len(head))))
	}
	if md.Spec.Router != nil {
		errs = append(errs, field.Forbidden(field.NewPath("spec", "router"),
			"a router in front of an Elastic EP deployment is not supported in this release: it would discover the Ray head and the worker members, which serve no HTTP; remove spec.router and address the deployment's Service, which selects the master"))
	}
	errs = append(errs, validateElasticShape(role, path)...)
	errs = append(errs, validateElasticCards(role, path)...)
	errs = append(errs, validateElasticOwned(role, path)...)
	errs = append(errs, validateElasticHead(md, ep, path.Child("elasticEp", "headInstanceType"), c)...)
	if had && stored.ElasticEP != nil {
		errs = append(errs, validateElasticEdit(role, stored, path)...)
	}
	return errs
}

// validateElasticShape: one Server instance of one Pod per member, on the rendered command line.
func validateElasticShape(role workerv1.ModelDeploymentRole, path *field.Path) field.ErrorList {
	var errs field.ErrorList
	if role.Kind != workerv1.RoleKindServer {
		errs = append(errs, field.Invalid(path.Child("kind"), role.Kind, "an Elastic EP role serves whole requests: kind must be Server"))
	}
	if role.Replicas != 1 {
		errs = append(errs, field.Invalid(path.Child("replicas"), role.Replicas,
			"an Elastic EP role is one serving instance: replicas must be 1; elasticEp.width sets how many engines it spans"))
	}
	if role.Size != 1 {
		errs = append(errs, field.Invalid(path.Child("size"), role.Size,
			"every Elastic EP member is a Pod of its own: size must be 1; elasticEp.width sets how many engines the instance spans"))
	}
	if role.TakesOver() {
		errs = append(errs, field.Forbidden(path.Child("command"),
			"the elastic renderer writes the members' command lines (the Ray join and the data-parallel flags); remove command and pass engine flags in extraArgs"))
	}
	return errs
}

// validateElasticCards: each member holds its tensor-parallel group on whole cards, one card per rank.
func validateElasticCards(role workerv1.ModelDeploymentRole, path *field.Path) field.ErrorList {
	var errs field.ErrorList
	res := role.Resources
	p := path.Child("resources")
	tp := engine.ElasticTensorParallel(role.ExtraArgs)
	if res == nil {
		return nil // the mutating half defaults the count to the tensor-parallel size
	}
	if res.AcceleratorSlicedMemoryPercentage != nil || res.AcceleratorSlicedCoresPercentage != nil {
		errs = append(errs, field.Forbidden(p, "an Elastic EP member holds whole cards; remove the logical slice request"))
	}
	if res.AcceleratorPartitionedProfile != "" {
		errs = append(errs, field.Forbidden(p.Child("acceleratorPartitionedProfile"), "an Elastic EP member holds whole cards; remove the partition profile"))
	}
	if res.Interface != nil && !res.Interface.IsZero() {
		errs = append(errs, field.Forbidden(p.Child("interface"), "an Elastic EP member requests no fabric interface; remove resources.interface"))
	}
	if a := res.Accelerator; a != nil && (a.MilliValue()%1000 != 0 || a.Value() != int64(tp)) {
		errs = append(errs, field.Invalid(p.Child("accelerator"), a.String(), fmt.Sprintf(
			"an Elastic EP member holds one whole card per tensor-parallel rank: its tensor-parallel size is %d, so request accelerator: %d (or omit it) or change --tensor-parallel-size",
			tp, tp)))
	}
	return errs
}

// validateElasticOwned: the flags and variables the elastic renderer writes are not the user's.
func validateElasticOwned(role workerv1.ModelDeploymentRole, path *field.Path) field.ErrorList {
	var errs field.ErrorList
	for j, arg := range role.ExtraArgs {
		if flag, owned := engine.ElasticOwnedArg(arg); owned {
			errs = append(errs, field.Forbidden(path.Child("extraArgs").Index(j), elasticOwnedMessage(flag)))
		}
	}
	for j, env := range role.Env {
		if engine.ElasticOwnedEnvName(env.Name) {
			errs = append(errs, field.Forbidden(path.Child("env").Index(j).Child("name"), elasticOwnedMessage(env.Name)))
		}
	}
	return errs
}

// validateElasticHead: the Ray head runs on a CPU-only InstanceType, read where the caller read the
// types (the webhook does; `mdplane validate` reads them from its files).
func validateElasticHead(md *workerv1.ModelDeployment, ep *workerv1.ModelDeploymentRoleElasticEP, path *field.Path, c Cluster) field.ErrorList {
	if ep.HeadInstanceType == "" {
		return field.ErrorList{field.Required(path, "name the CPU-only InstanceType the Ray head Pod runs on")}
	}
	if c.InstanceTypes == nil || md.DeletionTimestamp != nil {
		return nil
	}
	it := c.InstanceTypes[ep.HeadInstanceType]
	switch {
	case it == nil:
		return field.ErrorList{field.NotFound(path, ep.HeadInstanceType)}
	case it.Spec.Acceleratable:
		return field.ErrorList{field.Forbidden(path, fmt.Sprintf(
			"InstanceType %q is acceleratable, and the Ray head runs CPU-only; name a CPU-only InstanceType", ep.HeadInstanceType))}
	}
	return nil
}

// validateElasticEdit: width only grows, and the member configuration the profile admitted stays:
// resources (compared as quantities) and the effective tensor-parallel size.
func validateElasticEdit(role, stored workerv1.ModelDeploymentRole, path *field.Path) field.ErrorList {
	var errs field.ErrorList
	if role.ElasticEP.Width < stored.ElasticEP.Width {
		errs = append(errs, field.Forbidden(path.Child("elasticEp", "width"), ElasticScaleDownMessage))
	}
	// The schema rule freezes size, instanceType and command; resources are compared here, as
	// quantities.
	if !equality.Semantic.DeepEqual(role.Resources, stored.Resources) {
		errs = append(errs, field.Invalid(path, role.Name, ElasticFrozenMessage))
	}
	if tp, was := engine.ElasticTensorParallel(role.ExtraArgs), engine.ElasticTensorParallel(stored.ExtraArgs); tp != was {
		errs = append(errs, field.Forbidden(path.Child("extraArgs"), fmt.Sprintf(
			"the effective tensor-parallel size of an Elastic EP role is frozen at %d (it was %d at create, now %d); keep --tensor-parallel-size, or create another deployment",
			was, was, tp)))
	}
	return errs
}
