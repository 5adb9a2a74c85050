package renderroles

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"strconv"

	"github.com/mdplane/mdplane/apis/settings"
	workerv1 "github.com/mdplane/mdplane/apis/worker/v1"
)

// RenderVersion is the rendering baseline of this release: it changes when what the render
// synthesizes (flags, probes, labels, volumes) changes for the same inputs. It is written on every Pod
// and keys the revision, so new and replaced replicas take a new baseline while running ones stay.
// Each baseline, and what it added, is listed in docs/decisions/0004-revisions.md:
//
//	1: the first render.
//	2: the preStop drain hook on a managed role's engine container, and its default grace (30 s).
//	3: model artifact delivery: the weights volume and mount, the delivery's env, model argument
//	   and --revision, the engine cache's ephemeral-storage limit.
//	4: the wait-for-worker container of a managed multi-member role; the serving label
//	   (modeldeployment.gpustack.ai/serves) on every replica's leader and on
//	   every member of an External-DP Server role.
//	5: SGLang's store configured by the environment alone: no --hicache-storage-backend-extra-config
//	   (the weights' tag) on a role with a model artifact and a KV cache.
const RenderVersion = 5

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

// sha256Hex is the SHA-256 hex digest of b.
func sha256Hex(b []byte) string {
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:])
}

// revisionOf keys a revision by the role's configuration digest, the render baseline and the
// Settings the template was rendered under. A revision's ControllerRevision is immutable, and a
// Setting moves the template (an image, a sysctl) without moving the digest: a new revision lets the
// change reach new and replaced Pods while running replicas, whose digest still matches, stay. The
// default Settings add nothing, so a cluster without mdplane-settings keeps its revisions.
func revisionOf(configDigest string, s settings.Settings) string {
	key := configDigest + "/" + strconv.Itoa(RenderVersion)
	if b, d := settingsKey(s), settingsKey(settings.Defaults()); b != d {
		key += "/" + b
	}
	return sha256Hex([]byte(key))[:10]
}

// settingsKey is the Settings as the revision key reads them.
func settingsKey(s settings.Settings) string {
	b, _ := json.Marshal(s) // plain values: cannot fail
	return sha256Hex(b)
}
