package cluster

import (
	"os"
	"regexp"
	"testing"
)

// TestTheStackRunsWhatBuildShBuilds: the versions the stack runs its programs at are the ones
// build.sh builds; a pin bumped in one place alone would leave the stack looking for a binary that
// is never built.
func TestTheStackRunsWhatBuildShBuilds(t *testing.T) {
	build, err := os.ReadFile("build.sh")
	if err != nil {
		t.Fatal(err)
	}
	for variable, version := range map[string]string{
		"K8S": PinnedKubernetesVersion, "ETCD": EtcdVersion, "KUEUE": KueueVersion, "KWOK": KWOKVersion,
		"CROSSPLANE": CrossplaneVersion, "CROSSPLANE_CLI": CrossplaneCLIVersion, "PATCH_AND_TRANSFORM": PatchAndTransformVersion,
		"COREDNS": CoreDNSVersion, "INFERENCE_SIM": InferenceSimVersion, "CONTAINERD": ContainerdVersion, "RUNC": RuncVersion,
		"CNI_PLUGINS": CNIPluginsVersion,
	} {
		pinned := ""
		if m := regexp.MustCompile(`(?m)^` + variable + `=(\S+)`).FindSubmatch(build); m != nil {
			pinned = string(m[1])
		}
		if pinned != version {
			t.Errorf("build.sh pins %s=%q, the stack runs %s", variable, pinned, version)
		}
	}
}
