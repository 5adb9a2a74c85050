package routers

import (
	"strings"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	workerv1 "github.com/mdplane/mdplane/apis/worker/v1"
)

// eligibleTerm is the equality term a discovery selector gains to leave out the replicas
// qualification withdrew: the same term the role Services select on.
const eligibleTerm = workerv1.LabelEndpointEligible + "=true"

// The argv routers' selector flags the eligibility term is decided for.
const (
	selectorFlag        = "--selector"
	prefillSelectorFlag = "--prefill-selector"
	decodeSelectorFlag  = "--decode-selector"
)

// ConfigMapKeyEndpointSelector is llm-d-router's ConfigMap key holding its endpoint selector, and
// the name Eligibility.Kept gives that selector.
const ConfigMapKeyEndpointSelector = keyEndpointSelector

// Eligibility decides which of a router's discovery selectors carry the eligibility term. A
// selector follows the role Services: it gains the term once every role it covers has its Service
// select on it, because a role whose qualification is not active has no labelled Pods and a
// deployment-wide selector carrying the term would drop that whole role from discovery. Once a
// router's selector carries the term it keeps it, as a Service does, so a role added later never
// returns a withdrawn replica to the router.
type Eligibility struct {
	// Roles are the roles whose Services select on the eligibility label, by role name.
	Roles map[string]bool
	// Kept are the selectors the observed router already carries the term on: an argv router's
	// selector flags, or llm-d-router's endpoint-selector key.
	Kept map[string]bool
}

// selects reports whether the selector named key, covering roles, carries the eligibility term.
func (e Eligibility) selects(key string, roles []workerv1.ModelDeploymentRole) bool {
	if e.Kept[key] {
		return true
	}
	if len(roles) == 0 {
		return false
	}
	for _, r := range roles {
		if !e.Roles[r.Name] {
			return false
		}
	}
	return true
}

// KeptTerms are the selectors an observed router already carries the eligibility term on: the
// selector flags of an argv router's Deployment, and the endpoint selector of llm-d-router's
// ConfigMap. Either object may be nil (not observed yet).
func KeptTerms(deployment, configMap *unstructured.Unstructured) map[string]bool {
	kept := map[string]bool{}
	if deployment != nil {
		containers, _, _ := unstructured.NestedSlice(deployment.Object, "spec", "template", "spec", "containers")
		for _, c := range containers {
			container, _ := c.(map[string]any)
			if container["name"] != routerContainer {
				continue
			}
			args, _, _ := unstructured.NestedStringSlice(container, "args")
			for flag := range flagsCarryingTerm(args) {
				kept[flag] = true
			}
		}
	}
	if configMap != nil {
		selector, _, _ := unstructured.NestedString(configMap.Object, "data", ConfigMapKeyEndpointSelector)
		for _, term := range strings.Split(selector, ",") {
			if term == eligibleTerm {
				kept[ConfigMapKeyEndpointSelector] = true
			}
		}
	}
	return kept
}

// flagsCarryingTerm are the selector flags whose labels, spelled one per argument after the flag
// (selectorArgs), include the eligibility term.
func flagsCarryingTerm(args []string) map[string]bool {
	out := map[string]bool{}
	current := ""
	for _, a := range args {
		switch {
		case a == selectorFlag || a == prefillSelectorFlag || a == decodeSelectorFlag:
			current = a
		case strings.HasPrefix(a, "-"):
			current = ""
		case current != "" && a == eligibleTerm:
			out[current] = true
		}
	}
	return out
}

// rolesOfKind are the roles of one kind.
func rolesOfKind(roles []workerv1.ModelDeploymentRole, kind workerv1.RoleKind) []workerv1.ModelDeploymentRole {
	var out []workerv1.ModelDeploymentRole
	for _, r := range roles {
		if r.Kind == kind {
			out = append(out, r)
		}
	}
	return out
}
