package cluster

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// TestMountPointsAreReadAsTheKernelWritesThem: mountinfo escapes a space, a tab, a newline and a
// backslash in a path as three octal digits; the node's clean-up unmounts by the real path.
func TestMountPointsAreReadAsTheKernelWritesThem(t *testing.T) {
	for _, row := range []struct{ rule, raw, want string }{
		{"a plain path is as written", "/tmp/stack/node/kubelet/root", "/tmp/stack/node/kubelet/root"},
		{"a space is \\040", `/tmp/my\040stack/node`, "/tmp/my stack/node"},
		{"a backslash is \\134", `/tmp/a\134b`, `/tmp/a\b`},
		{"a backslash not followed by three octal digits stays", `/tmp/a\9`, `/tmp/a\9`},
	} {
		if got := unescapeMount(row.raw); got != row.want {
			t.Errorf("%s: %q read as %q, want %q", row.rule, row.raw, got, row.want)
		}
	}
}

// TestSystemPodsAreLoggedByComponent: a Function's Pods log under its package's name, a
// Deployment's under the Deployment's, any other Pod under its own.
func TestSystemPodsAreLoggedByComponent(t *testing.T) {
	rs := func(name string) []metav1.OwnerReference {
		return []metav1.OwnerReference{{Kind: "ReplicaSet", Name: name}}
	}
	for _, row := range []struct {
		rule string
		pod  corev1.Pod
		want string
	}{
		{"a Deployment's Pod logs under the Deployment", corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "mdplane-controllers-7897db6496-5xg6k",
			OwnerReferences: rs("mdplane-controllers-7897db6496")}}, "mdplane-controllers"},
		{"a Function's Pod logs under its package", corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "mdplane-function-kv-cache-db6d-5f6c-smmdv",
			Labels: map[string]string{"pkg.crossplane.io/function": "mdplane-function-kv-cache"}, OwnerReferences: rs("mdplane-function-kv-cache-db6d-5f6c")}},
			"mdplane-function-kv-cache"},
		{"a Pod of no ReplicaSet logs under its name", corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "static-pod"}}, "static-pod"},
	} {
		if got := podComponent(&row.pod); got != row.want {
			t.Errorf("%s: %q, want %q", row.rule, got, row.want)
		}
	}
}
