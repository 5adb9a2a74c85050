package renderroles

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"strconv"

	workerv1 "github.com/mdplane/mdplane/apis/worker/v1"
)

// RenderVersion is the rendering baseline of this release: it changes when what the render
// synthesizes (flags, probes, labels, volumes) changes for the same inputs. It is written on every Pod
// and keys the revision, so new and replaced replicas take a new baseline while running ones stay.
const RenderVersion = 1

// MinSupportedRenderVersion is the oldest render baseline this release keeps running in place.
const MinSupportedRenderVersion = 1

// RenderFloor is a deployment's effective render-version floor: its min-render-version annotation
// clamped to [MinSupportedRenderVersion, RenderVersion]; an absent or unreadable value is the lowest.
func RenderFloor(annotations map[string]string) int32 {
	n, err := strconv.Atoi(annotations[workerv1.AnnotationMinRenderVersion])
	switch {
	case err != nil || n < MinSupportedRenderVersion:
		return MinSupportedRenderVersion
	case n > RenderVersion:
		return RenderVersion
	}
	return int32(n)
}

// RoleServiceName is the name of a role's Service, which fronts its leaders: <md>-<role>.
func RoleServiceName(deployment, role string) string { return deployment + "-" + role }

// InstanceName is the name of a replica's headless Service and the stem of its members' names:
// <md>-<role>-r<N>.
func InstanceName(deployment, role string, ordinal int32) string {
	return RoleServiceName(deployment, role) + "-r" + strconv.Itoa(int(ordinal))
}

// MemberName is the name of one Pod of a replica above size 1: <md>-<role>-r<N>-m<M>.
func MemberName(deployment, role string, ordinal, member int32) string {
	return InstanceName(deployment, role, ordinal) + "-m" + strconv.Itoa(int(member))
}

// LeaderAddress is the DNS name of a replica's leader, m0, behind the replica's headless Service.
func LeaderAddress(deployment, role string, ordinal int32) string {
	return MemberName(deployment, role, ordinal, 0) + "." + InstanceName(deployment, role, ordinal)
}

// RevisionName names the ControllerRevision holding a role's revision: <md>-<role>-<revision>.
func RevisionName(deployment, role, revision string) string {
	return RoleServiceName(deployment, role) + "-" + revision
}

// maxGenerateNameBase leaves room for the five characters the API server appends to a generateName,
// so that an XR name stays a valid 63-character label value.
const maxGenerateNameBase = 57

// ReplicaGenerateName is the generateName of a ModelReplica: its instance name, shortened when the
// API server's suffix would take it over 63 characters. The labels carry its identity, not the name.
func ReplicaGenerateName(deployment, role string, ordinal int32) string {
	base := InstanceName(deployment, role, ordinal)
	if len(base) > maxGenerateNameBase {
		base = base[:maxGenerateNameBase]
	}
	for len(base) > 0 && base[len(base)-1] == '-' {
		base = base[:len(base)-1]
	}
	return base + "-"
}

// sha256Hex is the SHA-256 hex digest of b.
func sha256Hex(b []byte) string {
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:])
}

// revisionOf keys a revision by the role's configuration digest and the render baseline.
func revisionOf(configDigest string) string {
	return sha256Hex([]byte(configDigest + "/" + strconv.Itoa(RenderVersion)))[:10]
}

// seatHash is a Pod's pod-spec-hash: the role's configuration digest bound to the Pod's seat.
func seatHash(configDigest string, ordinal, member int32) string {
	return sha256Hex(fmt.Appendf(nil, `{"config":%q,"ordinal":%d,"member":%d}`, configDigest, ordinal, member))
}
