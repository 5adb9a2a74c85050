package validation_test

import (
	"testing"

	corev1 "k8s.io/api/core/v1"

	"github.com/mdplane/mdplane/apis/settings"
	"github.com/mdplane/mdplane/apis/validation"
	"github.com/mdplane/mdplane/apis/validation/refusaltest"
	workerv1 "github.com/mdplane/mdplane/apis/worker/v1"
)

func privileged(r *workerv1.ModelDeploymentRole) { r.Privileged = true }

func hostPath(mount, path string) func(*workerv1.ModelDeploymentRole) {
	return func(r *workerv1.ModelDeploymentRole) {
		r.AdditionalVolumes = append(r.AdditionalVolumes, workerv1.ModelDeploymentAdditionalVolume{MountPath: mount,
			HostPath: &corev1.HostPathVolumeSource{Path: path}})
	}
}

func withSettings(edit func(*settings.Settings)) validation.Cluster {
	s := settings.Defaults()
	edit(&s)
	return validation.Cluster{Settings: &s}
}

// TestSettingsDecideHostAccess: a privileged role and a hostPath volume are refused by default and
// admitted with their Setting; an update keeps what the stored role already had.
func TestSettingsDecideHostAccess(t *testing.T) {
	allowPrivileged := withSettings(func(s *settings.Settings) { s.InstancePrivilegedAllowed = true })
	allowHostPath := withSettings(func(s *settings.Settings) { s.InstanceHostPathVolumeAllowed = true })

	md := deployment(nil, role("s", "", privileged))
	refused(t, validation.ValidateCreate(md, validation.Cluster{}), "spec.roles[0].privileged",
		`role "s" asks for a privileged engine container`, "instance-privileged-allowed is false",
		`have an administrator set instance-privileged-allowed: "true" in the data of EnvironmentConfig mdplane-settings`)
	if errs := validation.ValidateCreate(md, allowPrivileged); len(errs) > 0 {
		t.Errorf("privileged with the Setting on: %v", errs)
	}
	if errs := validation.ValidateCreate(deployment(nil, role("s", "")), validation.Cluster{}); len(errs) > 0 {
		t.Errorf("an unprivileged role: %v", errs)
	}
	// Near miss: the stored role was privileged already (admitted while the Setting was on).
	if errs := validation.ValidateUpdate(md, deployment(nil, role("s", "", privileged)), validation.Cluster{}); len(errs) > 0 {
		t.Errorf("a stored privileged role, edited: %v", errs)
	}
	refused(t, validation.ValidateUpdate(md, deployment(nil, role("s", "")), validation.Cluster{}), "spec.roles[0].privileged", "instance-privileged-allowed")

	hp := deployment(nil, role("s", "", volumes("/scratch"), hostPath("/cache", "/mnt/nvme")))
	refused(t, validation.ValidateCreate(hp, validation.Cluster{}), "spec.roles[0].additionalVolumes[1].hostPath",
		`role "s" mounts host path "/mnt/nvme" at /cache`, "instance-host-path-volume-allowed is false",
		"use another volume source", `instance-host-path-volume-allowed: "true"`)
	if errs := validation.ValidateCreate(hp, allowHostPath); len(errs) > 0 {
		t.Errorf("hostPath with the Setting on: %v", errs)
	}
	if errs := refusaltest.Checked(t, validation.ValidateCreate(hp, allowPrivileged)); len(errs) != 1 {
		t.Errorf("one Setting does not allow the other: %v", errs)
	}
	if errs := validation.ValidateUpdate(hp, deployment(nil, role("s", "", hostPath("/cache", "/mnt/nvme"))), validation.Cluster{}); len(errs) > 0 {
		t.Errorf("a stored hostPath volume, kept: %v", errs)
	}
	refused(t, validation.ValidateUpdate(hp, deployment(nil, role("s", "", hostPath("/cache", "/mnt/other"))), validation.Cluster{}),
		"spec.roles[0].additionalVolumes[1].hostPath", "/mnt/nvme")
}

// TestDtypeOwnershipFollowsTheSetting: with model-deployment-kv-cache-dtype-owned off, a role's own
// --kv-cache-dtype is admitted beside spec.kvCache.
func TestDtypeOwnershipFollowsTheSetting(t *testing.T) {
	md := deployment(kvCache, role("s", "", args("--kv-cache-dtype=fp8")))
	refused(t, validation.ValidateCreate(md, validation.Cluster{}), "spec.roles[0].extraArgs[0]", "carries the KVCachePoolBinding's dtype")
	if errs := validation.ValidateCreate(md, withSettings(func(s *settings.Settings) { s.KVCacheDtypeOwned = false })); len(errs) > 0 {
		t.Errorf("--kv-cache-dtype with the Setting off: %v", errs)
	}
	// Near miss: the Setting does not release the flags mdplane owns for other reasons.
	refused(t, validation.ValidateCreate(deployment(kvCache, role("s", "", args("--kv-transfer-config", "{}"))),
		withSettings(func(s *settings.Settings) { s.KVCacheDtypeOwned = false })), "spec.roles[0].extraArgs[0]", "--kv-transfer-config is owned")
}
