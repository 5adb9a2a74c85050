package functions_test

import (
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/yaml"

	"github.com/mdplane/mdplane/apis/naming"
	workerv1 "github.com/mdplane/mdplane/apis/worker/v1"
	renderroles "github.com/mdplane/mdplane/functions/render-roles"
)

// TestEveryManagedEngineDrainsWhereItIsScraped renders every case through both functions and checks
// each Pod: a managed role's engine container (the Pods mdplane scrapes) drains through the hook
// built from the final scrape annotations — after the kv-cache step moved a decoder behind the
// routing proxy — and its grace; nothing else in the Pod has a hook.
func TestEveryManagedEngineDrainsWhereItIsScraped(t *testing.T) {
	cases, err := filepath.Glob("testdata/cases/*.yaml")
	require.NoError(t, err)
	pods := 0
	for _, c := range cases {
		out, msgs := render(t, c)
		require.Empty(t, msgs)
		for _, doc := range strings.Split(string(out), "\n---\n") {
			if !strings.Contains(doc, "\nkind: Pod\n") {
				continue
			}
			pod := &corev1.Pod{}
			require.NoError(t, yaml.Unmarshal([]byte(doc), pod))
			pods++
			name := filepath.Base(c) + " " + pod.Name + pod.GenerateName
			for _, init := range pod.Spec.InitContainers {
				assert.Nil(t, init.Lifecycle, "%s: %s (the routing proxy drains nothing)", name, init.Name)
			}
			port, scraped := pod.Annotations["prometheus.io/port"]
			main := pod.Spec.Containers[0]
			require.Equal(t, naming.MainContainer, main.Name)
			if !scraped {
				assert.Nil(t, main.Lifecycle, "%s: a take-over role gets no hook", name)
				continue
			}
			require.NotNil(t, pod.Spec.TerminationGracePeriodSeconds, "%s: a managed role always renders its grace", name)
			n, err := strconv.ParseInt(port, 10, 32)
			require.NoError(t, err)
			e := workerv1.EngineVLLM
			if strings.Contains(strings.Join(main.Command, " "), "sglang") {
				e = workerv1.EngineSGLang
			}
			assert.Equal(t, renderroles.DrainHook(e, pod.Annotations["prometheus.io/scheme"], int32(n), *pod.Spec.TerminationGracePeriodSeconds),
				main.Lifecycle, "%s: the hook reads where the Pod is scraped, within its grace", name)
		}
	}
	assert.Positive(t, pods)
}
