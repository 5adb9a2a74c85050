package main

import (
	"path/filepath"
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/mdplane/mdplane/internal/schemacheck"
)

// examplesDir is the repository's examples/, from this package.
var examplesDir = filepath.Join("..", "..", "examples")

// exampleRender is what `mdplane render` printed for one example beside examples/cluster.yaml.
type exampleRender []unstructured.Unstructured

// renderExample renders one file of examples/ with the cluster objects it references.
func renderExample(t *testing.T, name string) exampleRender {
	t.Helper()
	code, out, errOut := runCLI("render", "-f", filepath.Join(examplesDir, "cluster.yaml"), "-f", filepath.Join(examplesDir, name))
	if code != 0 {
		t.Fatalf("mdplane render %s: exit %d\n%s", name, code, errOut)
	}
	docs, err := schemacheck.SplitDocuments(name, []byte(out))
	if err != nil {
		t.Fatal(err)
	}
	objs := make(exampleRender, 0, len(docs))
	for _, d := range docs {
		objs = append(objs, *d.Object)
	}
	return objs
}

// pods are the rendered Pods of one deployment's role (component), in render order.
func (r exampleRender) pods(t *testing.T, deployment, component string) []corev1.Pod {
	t.Helper()
	var pods []corev1.Pod
	for _, obj := range r {
		labels := obj.GetLabels()
		if obj.GetKind() != "Pod" || labels["app.kubernetes.io/instance"] != deployment || labels["app.kubernetes.io/component"] != component {
			continue
		}
		var pod corev1.Pod
		if err := runtime.DefaultUnstructuredConverter.FromUnstructured(obj.Object, &pod); err != nil {
			t.Fatal(err)
		}
		pods = append(pods, pod)
	}
	if len(pods) == 0 {
		t.Fatalf("no Pod rendered for %s's role %s", deployment, component)
	}
	return pods
}

// object is the rendered object of a kind and name.
func (r exampleRender) object(t *testing.T, kind, name string) unstructured.Unstructured {
	t.Helper()
	for _, obj := range r {
		if obj.GetKind() == kind && obj.GetName() == name {
			return obj
		}
	}
	t.Fatalf("no %s %s rendered", kind, name)
	return unstructured.Unstructured{}
}

func cards(c corev1.Container) int64 {
	q := c.Resources.Limits["nvidia.com/gpu"]
	return q.Value()
}

func envNamed(c corev1.Container, name string) (corev1.EnvVar, bool) {
	i := slices.IndexFunc(c.Env, func(e corev1.EnvVar) bool { return e.Name == name })
	if i < 0 {
		return corev1.EnvVar{}, false
	}
	return c.Env[i], true
}

// hasArgPair reports flag followed by value on the container's command line.
func hasArgPair(c corev1.Container, flag, value string) bool {
	argv := append(slices.Clone(c.Command), c.Args...)
	for i := 0; i+1 < len(argv); i++ {
		if argv[i] == flag && argv[i+1] == value {
			return true
		}
	}
	return false
}

func probed(c corev1.Container) bool {
	return c.StartupProbe != nil && c.ReadinessProbe != nil && c.LivenessProbe != nil
}

// TestEachExampleRendersWhatItsCommentSays: every example's leading comment is a claim about what
// it renders, held here one row per claim; a new example needs its rows.
func TestEachExampleRendersWhatItsCommentSays(t *testing.T) {
	type claim struct {
		example, claim string
		check          func(t *testing.T, r exampleRender)
	}
	cases := []claim{
		{"qwen-chat.yaml", "one Server role of four replicas, two cards per Pod, sharing the team's DRAM KV cache pool", func(t *testing.T, r exampleRender) {
			pods := r.pods(t, "qwen-chat", "server")
			if len(pods) != 4 {
				t.Errorf("%d Pods, want 4", len(pods))
			}
			for _, p := range pods {
				main := p.Spec.Containers[0]
				if _, ok := envNamed(main, "MOONCAKE_CONFIG_PATH"); cards(main) != 2 || !ok {
					t.Errorf("%s: %d cards, Mooncake client config %v", p.GenerateName, cards(main), ok)
				}
			}
		}},
		{"on-the-stack.yaml", "one Server role of two replicas of two Pods each, one card and one unit per Pod, on the engine stand-in", func(t *testing.T, r exampleRender) {
			var names []string
			for _, p := range r.pods(t, "chat", "server") {
				names = append(names, p.Name)
				main := p.Spec.Containers[0]
				if cpu := main.Resources.Requests.Cpu().String(); cards(main) != 1 || cpu != "100m" || main.Image != "stack.mdplane.test/engine-stand-in:v0.10.2" {
					t.Errorf("%s: %d cards, %s CPU, image %s", p.Name, cards(main), cpu, main.Image)
				}
			}
			if want := []string{"chat-server-r0-m0", "chat-server-r0-m1", "chat-server-r1-m0", "chat-server-r1-m1"}; !slices.Equal(names, want) {
				t.Errorf("Pods %v, want %v", names, want)
			}
		}},
		{"on-the-stack.yaml", "the drain hook runs on the engine image's python3, as on vLLM's", func(t *testing.T, r exampleRender) {
			for _, p := range r.pods(t, "chat", "server") {
				hook := p.Spec.Containers[0].Lifecycle
				if !probed(p.Spec.Containers[0]) || hook == nil || hook.PreStop == nil || hook.PreStop.Exec == nil || hook.PreStop.Exec.Command[0] != "python3" {
					t.Errorf("%s: probes %v, preStop %+v", p.Name, probed(p.Spec.Containers[0]), hook)
				}
			}
		}},
		{"multi-host.yaml", "SGLang: two replicas of two Pods, m0 and m1, of 8 cards each, placed in one rack", func(t *testing.T, r exampleRender) {
			var names []string
			for _, p := range r.pods(t, "deepseek", "server") {
				names = append(names, p.Name)
				if cards(p.Spec.Containers[0]) != 8 || p.Annotations["kueue.x-k8s.io/podset-required-topology"] != "topology.gpustack.ai/rack" {
					t.Errorf("%s: %d cards, topology %q", p.Name, cards(p.Spec.Containers[0]), p.Annotations["kueue.x-k8s.io/podset-required-topology"])
				}
			}
			if want := []string{"deepseek-server-r0-m0", "deepseek-server-r0-m1", "deepseek-server-r1-m0", "deepseek-server-r1-m1"}; !slices.Equal(names, want) {
				t.Errorf("Pods %v, want %v", names, want)
			}
		}},
		{"multi-host.yaml", "SGLang: every member joins through the GPUSTACK_* variables, expanded by Kubernetes", func(t *testing.T, r exampleRender) {
			for _, p := range r.pods(t, "deepseek", "server") {
				main := p.Spec.Containers[0]
				if !hasArgPair(main, "--nnodes", "2") || !hasArgPair(main, "--node-rank", "$(GPUSTACK_MEMBER_INDEX)") ||
					!hasArgPair(main, "--dist-init-addr", "$(GPUSTACK_REPLICA_LEADER_ADDRESS):20000") {
					t.Errorf("%s: the join arguments are missing: %q", p.Name, main.Args)
				}
				leader, _ := envNamed(main, "GPUSTACK_REPLICA_LEADER_ADDRESS")
				index, _ := envNamed(main, "GPUSTACK_MEMBER_INDEX")
				replica := strings.TrimSuffix(p.Name, p.Name[strings.LastIndex(p.Name, "-"):])
				if leader.Value != replica+"-m0."+replica || index.ValueFrom == nil || index.ValueFrom.FieldRef == nil {
					t.Errorf("%s: leader %q, index %+v", p.Name, leader.Value, index.ValueFrom)
				}
			}
		}},
		{"multi-host.yaml", "SGLang: the probes hold on both members; only m0 is behind the role's Service", func(t *testing.T, r exampleRender) {
			for _, p := range r.pods(t, "deepseek", "server") {
				leader := strings.HasSuffix(p.Name, "-m0")
				if !probed(p.Spec.Containers[0]) || (p.Labels["modeldeployment.gpustack.ai/serves"] == "true") != leader {
					t.Errorf("%s: probed %v, serves label %q", p.Name, probed(p.Spec.Containers[0]), p.Labels["modeldeployment.gpustack.ai/serves"])
				}
			}
			selector, _, _ := unstructured.NestedStringMap(r.object(t, "Service", "deepseek-server").Object, "spec", "selector")
			if selector["modeldeployment.gpustack.ai/member-index"] != "0" {
				t.Errorf("the role's Service selects %v, not the leaders", selector)
			}
		}},
		{"multi-host.yaml", "vLLM: the role takes the command over with a shell adding --headless above m0", func(t *testing.T, r exampleRender) {
			for _, p := range r.pods(t, "deepseek-vllm", "server") {
				main := p.Spec.Containers[0]
				if len(main.Command) != 3 || main.Command[0] != "/bin/sh" || len(main.Args) != 0 {
					t.Fatalf("%s: command %q args %q", p.Name, main.Command, main.Args)
				}
				for _, want := range []string{`--nnodes "$GPUSTACK_REPLICA_SIZE"`, `--node-rank "$GPUSTACK_MEMBER_INDEX"`, `--master-addr "$GPUSTACK_REPLICA_LEADER_ADDRESS"`, `|| echo --headless`} {
					if !strings.Contains(main.Command[2], want) {
						t.Errorf("%s: the shell line lacks %s", p.Name, want)
					}
				}
				if _, ok := envNamed(main, "GPUSTACK_REPLICA_SIZE"); !ok {
					t.Errorf("%s: a take-over role still gets the GPUSTACK_* variables", p.Name)
				}
			}
		}},
		{"multi-host.yaml", "vLLM: a take-over role gets no probe or scrape annotation and reports itself unmanaged", func(t *testing.T, r exampleRender) {
			for _, p := range r.pods(t, "deepseek-vllm", "server") {
				main := p.Spec.Containers[0]
				if main.StartupProbe != nil || main.ReadinessProbe != nil || main.LivenessProbe != nil || main.Lifecycle != nil || p.Annotations["prometheus.io/scrape"] != "" {
					t.Errorf("%s: mdplane rendered a probe, drain hook or scrape annotation for a take-over role", p.Name)
				}
			}
			roles, _, _ := unstructured.NestedSlice(r.object(t, "ModelDeployment", "deepseek-vllm").Object, "status", "roles")
			if len(roles) != 1 || roles[0].(map[string]any)["unmanaged"] != true {
				t.Errorf("status.roles: %v", roles)
			}
		}},
		{"elastic-ep.yaml", "width engines of two H20 cards; the Ray head runs CPU-only on its own type", func(t *testing.T, r exampleRender) {
			members := r.pods(t, "moe-elastic", "server")
			if len(members) != 3 {
				t.Errorf("%d members, want width 3", len(members))
			}
			for _, p := range members {
				if cards(p.Spec.Containers[0]) != 2 {
					t.Errorf("%s ordinal %s: %d cards", p.GenerateName, p.Labels["modeldeployment.gpustack.ai/pod-ordinal"], cards(p.Spec.Containers[0]))
				}
			}
			head := r.pods(t, "moe-elastic", "moe-elastic-elastic-head")
			if len(head) != 1 || cards(head[0].Spec.Containers[0]) != 0 || head[0].Labels["kueue.x-k8s.io/queue-name"] == members[0].Labels["kueue.x-k8s.io/queue-name"] {
				t.Errorf("the Ray head: %d Pods, cards %d, queue %q", len(head), cards(head[0].Spec.Containers[0]), head[0].Labels["kueue.x-k8s.io/queue-name"])
			}
		}},
		{"elastic-ep.yaml", "ordinal 0 is the master, the only HTTP server; the others join its Ray cluster", func(t *testing.T, r exampleRender) {
			for _, p := range r.pods(t, "moe-elastic", "server") {
				master := p.Labels["modeldeployment.gpustack.ai/pod-ordinal"] == "0"
				script := strings.Join(p.Spec.Containers[0].Command, " ")
				if probed(p.Spec.Containers[0]) != master || !strings.Contains(script, "ray start") || strings.Contains(script, "exec \"$@\"") != master {
					t.Errorf("ordinal %s: probed %v, command %q", p.Labels["modeldeployment.gpustack.ai/pod-ordinal"], probed(p.Spec.Containers[0]), script)
				}
			}
			selector, _, _ := unstructured.NestedStringMap(r.object(t, "Service", "moe-elastic-server").Object, "spec", "selector")
			if selector["modeldeployment.gpustack.ai/pod-ordinal"] != "0" {
				t.Errorf("the role's Service selects %v, not the master", selector)
			}
		}},
		{"prefill-decode.yaml", "a prefill/decode pair over RDMA sharing the team's pool, llm-d-router in front", func(t *testing.T, r exampleRender) {
			for _, role := range []string{"prefill", "decode"} {
				for _, p := range r.pods(t, "qwen-pd", role) {
					main := p.Spec.Containers[0]
					args := strings.Join(main.Args, " ")
					if !strings.Contains(args, `"mooncake_protocol":"rdma"`) || !strings.Contains(args, "MooncakeStoreConnector") {
						t.Errorf("%s %s: no RDMA transfer beside the pool's store connector: %s", role, p.GenerateName, args)
					}
					if _, ok := envNamed(main, "MOONCAKE_CONFIG_PATH"); !ok {
						t.Errorf("%s %s: no Mooncake client configuration", role, p.GenerateName)
					}
				}
			}
			r.object(t, "Deployment", "qwen-pd-router")
		}},
		{"model-artifacts.yaml", "a hub source is downloaded by the engine at the resolved commit into an emptyDir", func(t *testing.T, r exampleRender) {
			for _, md := range []string{"qwen-hf", "qwen-modelscope"} {
				p := r.pods(t, md, "server")[0]
				argv := strings.Join(append(p.Spec.Containers[0].Command, p.Spec.Containers[0].Args...), " ")
				if !strings.Contains(argv, "--revision ") || !slices.ContainsFunc(p.Spec.Volumes, func(v corev1.Volume) bool { return v.EmptyDir != nil && v.Name == "gpustack-model-cache" }) {
					t.Errorf("%s: %s, volumes %v", md, argv, p.Spec.Volumes)
				}
			}
		}},
		{"model-artifacts.yaml", "a claim is mounted read-only; an image is an image volume; every deployment serves under spec.model.name", func(t *testing.T, r exampleRender) {
			for md, source := range map[string]func(corev1.Volume) bool{
				"qwen-pvc":   func(v corev1.Volume) bool { return v.PersistentVolumeClaim != nil },
				"qwen-image": func(v corev1.Volume) bool { return v.Image != nil },
			} {
				p := r.pods(t, md, "server")[0]
				main := p.Spec.Containers[0]
				i := slices.IndexFunc(main.VolumeMounts, func(m corev1.VolumeMount) bool { return m.Name == "gpustack-model" })
				if !slices.ContainsFunc(p.Spec.Volumes, source) || i < 0 || !main.VolumeMounts[i].ReadOnly {
					t.Errorf("%s: volumes %v, mounts %v", md, p.Spec.Volumes, main.VolumeMounts)
				}
			}
			for _, md := range []string{"qwen-hf", "qwen-modelscope", "qwen-pvc", "qwen-image"} {
				if main := r.pods(t, md, "server")[0].Spec.Containers[0]; !hasArgPair(main, "--served-model-name", "qwen2.5-7b-instruct") {
					t.Errorf("%s serves under %q", md, main.Args)
				}
			}
		}},
		{"edits/qwen-chat.yaml", "qwen-chat edited: a newer engine image, a context-length flag and an env variable", func(t *testing.T, r exampleRender) {
			before := renderExample(t, "qwen-chat.yaml").pods(t, "qwen-chat", "server")[0].Spec.Containers[0]
			after := r.pods(t, "qwen-chat", "server")[0].Spec.Containers[0]
			if before.Image == after.Image || !hasArgPair(after, "--max-model-len", "32768") || hasArgPair(before, "--max-model-len", "32768") {
				t.Errorf("image %s → %s, args %q", before.Image, after.Image, after.Args)
			}
			if _, ok := envNamed(after, "VLLM_LOGGING_LEVEL"); !ok {
				t.Error("the env variable is not rendered")
			}
		}},
	}
	rendered := map[string]exampleRender{}
	for _, c := range cases {
		t.Run(c.example+": "+c.claim, func(t *testing.T) {
			r, ok := rendered[c.example]
			if !ok {
				r = renderExample(t, c.example)
				rendered[c.example] = r
			}
			c.check(t, r)
		})
	}
	// Every example file has its claims here.
	files, _ := filepath.Glob(filepath.Join(examplesDir, "*.yaml"))
	edits, _ := filepath.Glob(filepath.Join(examplesDir, "edits", "*.yaml"))
	for _, f := range append(files, edits...) {
		name, _ := filepath.Rel(examplesDir, f)
		if name != "cluster.yaml" && !slices.ContainsFunc(cases, func(c claim) bool { return c.example == name }) {
			t.Errorf("examples/%s has no row here: add the claims of its comment", name)
		}
	}
}
