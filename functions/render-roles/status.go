package renderroles

import (
	"fmt"
	"sort"
	"strings"

	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	workerv1 "github.com/mdplane/mdplane/apis/worker/v1"
	"github.com/mdplane/mdplane/internal/replicas"
)

// Condition is a condition the function reports on the deployment.
type Condition struct {
	Status  string // True, False or Unknown
	Reason  string
	Message string
}

// quotaReasons maps an instance state that keeps a deployment short of quota to the condition's
// reason, in the order a person should look at them.
var quotaReasons = []struct{ state, reason string }{
	{replicas.QuotaParked, "Parked"},
	{replicas.QuotaNoQueue, "NoQueueInReservedNamespace"},
	{replicas.QuotaPreempted, "PreemptedInPart"},
	{replicas.QuotaIncomplete, "PodGroupIncomplete"},
	{replicas.QuotaPending, "Pending"},
}

// TypeShortage reads an InstanceType's status for why a Pod asking cardsPerPod whole cards cannot
// start on it: no schedulable node with capacity (its NodesAvailable condition), no card free, or
// none with that many free on one node. Empty when the status names nothing (or nothing is known):
// the queue's own word then stands.
func TypeShortage(it *workerv1.InstanceType, cardsPerPod int64) string {
	if it == nil {
		return ""
	}
	if _, autoscaled, _ := it.AutoscaledCapacity(); autoscaled {
		return "" // its nodes come when a replica group asks for them; the role's provisioning note says how that goes
	}
	if c := apimeta.FindStatusCondition(it.Status.Conditions, workerv1.InstanceTypeNodesAvailable); c != nil && c.Status == metav1.ConditionFalse {
		return fmt.Sprintf("InstanceType %s has no nodes: %s", it.Name, c.Message)
	}
	v := it.Status.Accelerator
	if !it.Spec.Acceleratable || v == nil || v.Capacity == nil || v.Remaining == nil || cardsPerPod == 0 {
		return ""
	}
	switch capacity, free := v.Capacity.Value(), v.Remaining.Value(); {
	case capacity > 0 && free == 0:
		return fmt.Sprintf("InstanceType %s has no free cards (0 of %d free)", it.Name, capacity)
	case v.OnceMaxRequest != nil && v.OnceMaxRequest.Value() < cardsPerPod:
		return fmt.Sprintf("no node of InstanceType %s has %d free cards (at most %d on one node, %d of %d free in all)",
			it.Name, cardsPerPod, v.OnceMaxRequest.Value(), free, capacity)
	}
	return ""
}

// RoleShortage is what a role's waiting instances are told: its InstanceType's shortage
// (TypeShortage), and, for a role with topology.requiredLevel, that each replica's Pods must fit in
// one domain of that level. Kueue's own word on a group no domain holds names the Topology, not the
// level the role asked for.
func RoleShortage(it *workerv1.InstanceType, role workerv1.ModelDeploymentRole) string {
	var lacks []string
	if lack := TypeShortage(it, wholeCards(role.Resources)); lack != "" {
		lacks = append(lacks, lack)
	}
	if role.Topology != nil && role.Topology.RequiredLevel != "" {
		size := max(role.Size, 1)
		lacks = append(lacks, fmt.Sprintf("role %s needs the %d Pods of each replica within one domain of topology level %s", role.Name, size, role.Topology.RequiredLevel))
	}
	return strings.Join(lacks, "; ")
}

// QuotaCondition is the deployment's QuotaReserved condition from each role's desired replicas, its
// instances counted by admission state, what its InstanceType lacks (shortages, by role, from
// TypeShortage; told only for a role with instances waiting in their queue or assembling), and who
// Kueue preempted its instances for (preempted, by role: the role's PreemptedBy). The reason is the
// spec's; the shortages and preemptions lengthen the message.
func QuotaCondition(desired map[string]int32, states map[string]map[string]int32, shortages, preempted map[string]string) Condition {
	var total, reserved, terminating int32
	short := map[string][]string{}
	for role, n := range desired {
		total += n
		reserved += states[role][replicas.QuotaReserved]
		terminating += states[role][replicas.QuotaTerminating]
		for state, count := range states[role] {
			if count > 0 && state != replicas.QuotaReserved {
				short[state] = append(short[state], fmt.Sprintf("%s %d", role, count))
			}
		}
	}
	if total == 0 {
		return Condition{"Unknown", "NoReplicas", "the deployment declares no replicas"}
	}
	if reserved >= total {
		return Condition{"True", "Reserved", fmt.Sprintf("all %d instances hold quota", total)}
	}
	var details []string
	states2 := make([]string, 0, len(short))
	for s := range short {
		states2 = append(states2, s)
	}
	sort.Strings(states2)
	for _, s := range states2 {
		sort.Strings(short[s])
		details = append(details, fmt.Sprintf("%s: %s", s, strings.Join(short[s], ", ")))
	}
	message := fmt.Sprintf("%d of %d instances hold quota", reserved, total)
	if len(details) > 0 {
		message += " (" + strings.Join(details, "; ") + ")"
	}
	if terminating == total {
		return Condition{"Unknown", "AllReplicasTerminating", message}
	}
	if lacks := append(typeShortages(states, shortages), preemptions(desired, preempted)...); len(lacks) > 0 {
		message += ": " + strings.Join(lacks, "; ")
	}
	for _, r := range quotaReasons {
		if len(short[r.state]) > 0 {
			return Condition{"False", r.reason, message}
		}
	}
	return Condition{"Unknown", "AdmissionInFlight", message}
}

// preemptions are the declared roles' preemptions, "role <name> <ordinal>: <who and why>", by role.
func preemptions(desired map[string]int32, preempted map[string]string) []string {
	var out []string
	for role, who := range preempted {
		if _, declared := desired[role]; declared && who != "" {
			out = append(out, fmt.Sprintf("role %s %s", role, who))
		}
	}
	sort.Strings(out)
	return out
}

// typeShortages are the shortages of the roles with instances waiting in their queue or
// assembling, each told once, sorted.
func typeShortages(states map[string]map[string]int32, shortages map[string]string) []string {
	seen := map[string]bool{}
	var lacks []string
	for role, lack := range shortages {
		if lack == "" || states[role][replicas.QuotaPending]+states[role][replicas.QuotaIncomplete] == 0 || seen[lack] {
			continue
		}
		seen[lack] = true
		lacks = append(lacks, lack)
	}
	sort.Strings(lacks)
	return lacks
}

// RoleRollout is what the deployment step reads off an observed ModelRole for ReplicasUpToDate.
type RoleRollout struct {
	Desired  int32
	UpToDate int64
	// Observed is false before the role composite has reported.
	Observed bool
	// Replacing is true while the rollout controller has a replacement in flight for the role.
	Replacing bool
	// OlderCompatible counts the up-to-date instances kept on an older render baseline.
	OlderCompatible int64
	// Gate is the gate the role's next departure waits at (ModelRoleStatus.Replacement).
	Gate string
	// Held is the role's rollout hold (workerv1.AnnotationRolloutHeld: a reason, a colon, a message).
	Held string
}

// RolloutHeldByCache is the reason a role's outdated replicas stay while its deployment's KV cache
// connection is unresolved: the cache step writes it on the role's rollout-held annotation, and the
// rollout controller replaces no outdated replica of a role carrying it.
const RolloutHeldByCache = workerv1.ReasonRolloutHeldByCache

// HeldByCache reports whether a rollout-held annotation value is a cache hold.
func HeldByCache(held string) bool {
	return workerv1.RolloutHeldBy(held, RolloutHeldByCache)
}

// UpToDateCondition is the deployment's ReplicasUpToDate condition: True when every role's desired
// replicas are up to date, False with RolloutHeldByWeights while the weights hold (weightsHeld, the
// hold's annotation value) keeps new Pods from being created, RolloutHeldByCache while a role with
// instances behind carries the cache hold (its outdated replicas are not replaced),
// ReplacementInProgress while a replacement is in flight and RolloutInProgress otherwise, Unknown
// before any role has reported.
func UpToDateCondition(roles map[string]RoleRollout, weightsHeld string) Condition {
	var desired, upToDate, older int64
	var observed, replacing bool
	var behind, gates []string
	cacheHeld, cacheHeldRole := "", "" // the cache hold of the first role, by name, with instances behind
	for name, r := range roles {
		switch r.Gate {
		case workerv1.ReplacementGateAdmitted:
			gates = append(gates, name+" waits for its replacement to be admitted")
		case workerv1.ReplacementGateReady:
			gates = append(gates, name+" waits for its replacement to be Ready (capacity-preserving cadence)")
		}
		older += r.OlderCompatible
		desired += int64(r.Desired)
		observed = observed || r.Observed
		replacing = replacing || r.Replacing
		n := min(r.UpToDate, int64(r.Desired))
		upToDate += n
		if n < int64(r.Desired) {
			behind = append(behind, fmt.Sprintf("%s %d of %d", name, n, r.Desired))
			if HeldByCache(r.Held) && (cacheHeldRole == "" || name < cacheHeldRole) {
				cacheHeld, cacheHeldRole = r.Held, name
			}
		}
	}
	if !observed && weightsHeld == "" {
		return Condition{"Unknown", "RolloutNotObserved", "no role has reported its replicas yet"}
	}
	// Older compatible instances are up to date, and told apart: they run the current configuration
	// on an older render baseline, kept in place until min-render-version rises above it.
	compatible := ""
	if older > 0 {
		compatible = fmt.Sprintf("; %d of them on an older compatible render baseline, kept in place until %s rises above it", older, workerv1.AnnotationMinRenderVersion)
	}
	if len(behind) == 0 {
		return Condition{"True", "UpToDate", fmt.Sprintf("all %d instances run the current configuration", desired) + compatible}
	}
	sort.Strings(behind)
	message := fmt.Sprintf("%d of %d instances run the current configuration (%s)", upToDate, desired, strings.Join(behind, ", ")) + compatible
	if weightsHeld != "" {
		_, why, _ := strings.Cut(weightsHeld, ": ")
		return Condition{"False", RolloutHeldByWeights, message + "; no Pod is created until the weights can be delivered: " + why}
	}
	if cacheHeld != "" {
		// The hold outranks a replacement in flight: the rollout controller starts no departure
		// while it stands, so nothing more turns over until the connection resolves.
		_, why, _ := strings.Cut(cacheHeld, ": ")
		return Condition{"False", RolloutHeldByCache, message + "; the outdated replicas keep serving with the cache client they have until the KV cache connection resolves: " + why}
	}
	if replacing {
		waits := ""
		if len(gates) > 0 {
			sort.Strings(gates)
			waits = ": " + strings.Join(gates, ", ")
		}
		return Condition{"False", "ReplacementInProgress", message + "; one replica per role is replaced at a time" + waits}
	}
	return Condition{"False", "RolloutInProgress", message}
}
