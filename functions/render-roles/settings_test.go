package renderroles_test

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"

	"github.com/mdplane/mdplane/apis/settings"
	workerv1 "github.com/mdplane/mdplane/apis/worker/v1"
	renderroles "github.com/mdplane/mdplane/functions/render-roles"
)

// TestSettingsReachTheTemplateNotTheDigest: a Setting reaches new and replaced Pods (the template,
// under the render version) without moving the digest, except the dtype ownership, whose flip
// moves it on a cached role, as the spec says.
func TestSettingsReachTheTemplateNotTheDigest(t *testing.T) {
	pair := []workerv1.ModelDeploymentRole{
		{Name: "prefill", Kind: workerv1.RoleKindPrefill, InstanceType: "h100"},
		{Name: "decode", Kind: workerv1.RoleKindDecode, InstanceType: "h100"},
	}
	render := func(t *testing.T, e workerv1.Engine, roles []workerv1.ModelDeploymentRole, role int, cached bool, edit func(*settings.Settings)) *renderroles.RenderedRole {
		t.Helper()
		s := spec(roles...)
		s.Engine.Name = e
		in := renderroles.Role{Namespace: "team-a", Deployment: "qwen", Spec: s, Role: roles[role], InstanceType: h100()}
		if cached {
			s.KVCache = &workerv1.ModelDeploymentKVCache{PoolRef: workerv1.KVCachePoolBindingReference{Name: "team"}}
		}
		if edit != nil {
			st := settings.Defaults()
			edit(&st)
			in.Settings = &st
		}
		r, err := renderroles.RenderRole(in)
		require.NoError(t, err)
		return r
	}
	tw := func(s *settings.Settings) { s.TCPTWReuse = true }
	sysctls := func(r *renderroles.RenderedRole) []corev1.Sysctl {
		if r.Template.Spec.SecurityContext == nil {
			return nil
		}
		return r.Template.Spec.SecurityContext.Sysctls
	}

	prefill := render(t, workerv1.EngineSGLang, pair, 0, false, tw)
	assert.Equal(t, []corev1.Sysctl{{Name: "net.ipv4.tcp_tw_reuse", Value: "1"}}, sysctls(prefill))
	assert.Equal(t, render(t, workerv1.EngineSGLang, pair, 0, false, nil).ConfigDigest, prefill.ConfigDigest, "tcp_tw_reuse does not roll")
	assert.Empty(t, sysctls(render(t, workerv1.EngineSGLang, pair, 0, false, nil)), "off by default")
	assert.Empty(t, sysctls(render(t, workerv1.EngineSGLang, pair, 1, false, tw)), "near miss: the decode half")
	assert.Empty(t, sysctls(render(t, workerv1.EngineVLLM, pair, 0, false, tw)), "near miss: a vLLM pair")
	assert.Empty(t, sysctls(render(t, workerv1.EngineSGLang, pair[:1], 0, false, tw)), "near miss: a prefill role without its decode half")

	images := func(s *settings.Settings) { s.RouterImage, s.ContainerRegistry = "x/router:v2", "registry.local" }
	assert.Equal(t, render(t, workerv1.EngineSGLang, pair, 1, true, nil).ConfigDigest, render(t, workerv1.EngineSGLang, pair, 1, true, images).ConfigDigest,
		"image Settings do not roll")

	transient := func(s *settings.Settings) { s.InstanceTypeTransientTaints = "health.example.com/" }
	assert.Equal(t, render(t, workerv1.EngineSGLang, pair, 1, false, nil).Revision, render(t, workerv1.EngineSGLang, pair, 1, false, transient).Revision,
		"the transient taints, read by the queues alone, keep the revision")
	assert.NotEqual(t, render(t, workerv1.EngineSGLang, pair, 1, false, nil).Revision, render(t, workerv1.EngineSGLang, pair, 1, false, images).Revision,
		"near miss: an image Setting moves the revision")

	unowned := func(s *settings.Settings) { s.KVCacheDtypeOwned = false }
	assert.NotEqual(t, render(t, workerv1.EngineSGLang, pair, 1, true, nil).ConfigDigest, render(t, workerv1.EngineSGLang, pair, 1, true, unowned).ConfigDigest,
		"flipping the dtype ownership moves the pod-spec hash of a cached role")
	assert.Equal(t, render(t, workerv1.EngineSGLang, pair, 1, true, nil).ConfigDigest, render(t, workerv1.EngineSGLang, pair, 1, true, func(*settings.Settings) {}).ConfigDigest,
		"the default, written out, is the digest of no Settings")
	assert.Equal(t, render(t, workerv1.EngineSGLang, pair, 1, false, nil).ConfigDigest, render(t, workerv1.EngineSGLang, pair, 1, false, unowned).ConfigDigest,
		"near miss: an uncached role renders no dtype, so the flip does not roll it")
}
