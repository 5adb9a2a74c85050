package bench

import (
	"cmp"
	"context"
	"fmt"
	"io"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/mdplane/mdplane/apis/composite/v1alpha1"
	"github.com/mdplane/mdplane/apis/naming"
	workerv1 "github.com/mdplane/mdplane/apis/worker/v1"
)

// rolling is the deployment of the rolling-edit phase.
const rolling = "rolling"

// PhaseResult is one change to a running deployment: how long until it settled, and the writes it
// took per replica it changed.
type PhaseResult struct {
	Name    string
	Changed int
	Elapsed time.Duration
	Writes  Writes
}

// Print writes the phase's line: its time and the writes of Crossplane and mdplane-controllers per
// replica changed, events apart.
func (p PhaseResult) Print(out io.Writer) {
	ours, events := p.Writes.ours()
	fmt.Fprintf(out, "  %-44s %3d replicas changed, settled in %6.1f s; crossplane + mdplane-controllers %6d writes, %6.1f per replica changed (%.1f without events)\n",
		p.Name, p.Changed, p.Elapsed.Seconds(), ours, float64(ours)/float64(p.Changed), float64(ours-events)/float64(p.Changed))
	var keys [][2]string
	for k := range p.Writes.byResource {
		if slices.Contains(ourClients, k[0]) {
			keys = append(keys, k)
		}
	}
	slices.SortFunc(keys, func(a, b [2]string) int { return cmp.Compare(p.Writes.byResource[b], p.Writes.byResource[a]) })
	var parts []string
	for _, k := range keys[:min(len(keys), 8)] {
		parts = append(parts, fmt.Sprintf("%s %s %.1f", k[0], k[1], float64(p.Writes.byResource[k])/float64(p.Changed)))
	}
	fmt.Fprintf(out, "    per replica changed: %s\n", strings.Join(parts, ", "))
}

// Scale sets the deployment's replicas and waits until exactly that many replicas stand, every
// member Ready and none leaving.
func (r *Runner) Scale(ctx context.Context, from, to int) (*PhaseResult, error) {
	start := time.Now()
	patch := fmt.Sprintf(`[{"op":"replace","path":"/spec/roles/0/replicas","value":%d}]`, to)
	if err := r.c.Patch(ctx, r.deployment(), client.RawPatch(types.JSONPatchType, []byte(patch))); err != nil {
		return nil, fmt.Errorf("scaling to %d: %w", to, err)
	}
	r.logf("scaling %s/%s from %d to %d replicas", namespace, deployment, from, to)
	if err := r.settle(ctx, deployment, to, start); err != nil {
		return nil, err
	}
	return r.phase(fmt.Sprintf("scale %d → %d", from, to), abs(to-from), start)
}

// RollingEdit creates a second deployment of replicas, waits until it stands, edits its role's
// extraArgs and waits until every replica has been replaced by one of the new configuration.
func (r *Runner) RollingEdit(ctx context.Context, replicas int) (*PhaseResult, error) {
	md := r.deploymentOf(rolling, replicas)
	if err := r.c.Create(ctx, md); err != nil {
		return nil, fmt.Errorf("creating %s: %w", rolling, err)
	}
	if err := r.settle(ctx, rolling, replicas, time.Now()); err != nil {
		return nil, err
	}
	// Its Pods Ready is not yet the deployment standing: the replicas' and the role's reports of
	// that readiness follow within seconds, and are the create's writes, not the edit's.
	if err := poll(ctx, r.cfg.Timeout, rolling+" Ready, every replica reported Ready", func() error {
		return r.reported(ctx, md, replicas)
	}); err != nil {
		return nil, err
	}
	before, err := r.roleRevision(ctx, rolling)
	if err != nil {
		return nil, err
	}
	start := time.Now()
	patch := `[{"op":"add","path":"/spec/roles/0/extraArgs","value":["--max-model-len","8192"]}]`
	if err := r.c.Patch(ctx, md, client.RawPatch(types.JSONPatchType, []byte(patch))); err != nil {
		return nil, fmt.Errorf("editing %s: %w", rolling, err)
	}
	r.logf("rolling %s/%s: extraArgs edited on its %d replicas", namespace, rolling, replicas)
	// The role takes the new revision once the deployment's composition re-renders it; until then
	// every replica is on the role's (old) revision and would pass for settled.
	if err := poll(ctx, r.cfg.Timeout, "the role's new revision", func() error {
		now, err := r.roleRevision(ctx, rolling)
		if err == nil && now == before {
			err = fmt.Errorf("the role is still on revision %s", before)
		}
		return err
	}); err != nil {
		return nil, err
	}
	if err := r.settle(ctx, rolling, replicas, start); err != nil {
		return nil, err
	}
	return r.phase(fmt.Sprintf("rolling extraArgs edit of a %d-replica role", replicas), replicas, start)
}

// reported is nil once the deployment is Ready and each of its replicas reports its members Ready.
func (r *Runner) reported(ctx context.Context, md *unstructured.Unstructured, replicas int) error {
	if r.readySince(ctx, md).IsZero() {
		return fmt.Errorf("%s is not Ready", md.GetName())
	}
	list := &v1alpha1.ModelReplicaList{}
	if err := r.c.List(ctx, list, client.InNamespace(namespace), client.MatchingLabels(naming.RoleLabels(md.GetName(), "server"))); err != nil {
		return err
	}
	unreported := replicas - len(list.Items)
	for _, mr := range list.Items {
		if mr.Status.ReadyMembers == nil || int(*mr.Status.ReadyMembers) != r.cfg.Size {
			unreported++
		}
	}
	if unreported > 0 {
		return fmt.Errorf("%d of %d replicas have not reported their members Ready", unreported, replicas)
	}
	return nil
}

// roleRevision is the current revision of a deployment's role.
func (r *Runner) roleRevision(ctx context.Context, name string) (string, error) {
	role := &v1alpha1.ModelRole{}
	err := r.c.Get(ctx, client.ObjectKey{Namespace: namespace, Name: naming.RoleServiceName(name, "server")}, role)
	return role.Spec.Revision, err
}

func (r *Runner) phase(name string, changed int, start time.Time) (*PhaseResult, error) {
	p := &PhaseResult{Name: name, Changed: changed, Elapsed: time.Since(start)}
	var err error
	p.Writes, err = countWrites(r.stack.AuditLog(), start, time.Now())
	r.logf("%s: settled after %s", name, p.Elapsed.Round(time.Second))
	return p, err
}

// settle waits until a deployment's role stands at replicas, all on its current revision: that many
// ModelReplicas, each with all its members, every member Ready and none leaving. Pods changed since
// start must have been created after it: a replaced replica's Pods are new.
func (r *Runner) settle(ctx context.Context, name string, replicas int, start time.Time) error {
	logged := time.Now()
	return poll(ctx, r.cfg.Timeout, name+" settled at "+fmt.Sprint(replicas)+" replicas", func() error {
		err := r.settled(ctx, name, replicas)
		if err != nil && time.Since(logged) >= 10*time.Second {
			logged = time.Now()
			r.logf("%4.0fs: %s: %v", time.Since(start).Seconds(), name, err)
		}
		return err
	})
}

func (r *Runner) settled(ctx context.Context, name string, replicas int) error {
	current, err := r.roleRevision(ctx, name)
	if err != nil {
		return err
	}
	list := &v1alpha1.ModelReplicaList{}
	if err := r.c.List(ctx, list, client.InNamespace(namespace), client.MatchingLabels(naming.RoleLabels(name, "server"))); err != nil {
		return err
	}
	outdated := 0
	for _, mr := range list.Items {
		if mr.Spec.Revision != current {
			outdated++
		}
	}
	pods := &corev1.PodList{}
	if err := r.c.List(ctx, pods, client.InNamespace(namespace), client.MatchingLabels(naming.RoleLabels(name, "server"))); err != nil {
		return err
	}
	ready, leaving := 0, 0
	for _, p := range pods.Items {
		if p.DeletionTimestamp != nil {
			leaving++
		}
		for _, c := range p.Status.Conditions {
			if c.Type == corev1.PodReady && c.Status == corev1.ConditionTrue {
				ready++
			}
		}
	}
	want := replicas * r.cfg.Size
	if len(list.Items) != replicas || outdated > 0 || len(pods.Items) != want || ready != want || leaving > 0 {
		return fmt.Errorf("%d ModelReplicas (%d outdated), %d Pods (%d Ready, %d leaving); want %d replicas of %d Ready Pods",
			len(list.Items), outdated, len(pods.Items), ready, leaving, replicas, r.cfg.Size)
	}
	return nil
}

// ourClients are the clients whose writes a run is judged by.
var ourClients = []string{"crossplane", "mdplane-controllers"}

// ours is the writes of Crossplane and mdplane-controllers, and how many of them were events.
func (w Writes) ours() (all, events int) {
	for _, c := range ourClients {
		all += w.byClient[c]
		events += w.byResource[[2]string{c, "events"}]
	}
	return all, events
}

func abs(n int) int {
	if n < 0 {
		return -n
	}
	return n
}

// deploymentOf is a deployment of one vLLM role of replicas × the run's size on the bench's
// InstanceType.
func (r *Runner) deploymentOf(name string, replicas int) *unstructured.Unstructured {
	return &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": workerv1.SchemeGroupVersion.String(), "kind": workerv1.ModelDeploymentKind,
		"metadata": map[string]any{"name": name, "namespace": namespace},
		"spec": map[string]any{
			"model":  map[string]any{"name": "Qwen/Qwen3-8B"},
			"engine": map[string]any{"name": "vLLM", "image": "vllm/vllm-openai:v0.25.1"},
			"roles":  r.roles(replicas),
		},
	}}
}

// roles are the deployment's roles of replicas each: one Server, or a Prefill and a Decode role.
func (r *Runner) roles(replicas int) []any {
	role := func(name, kind string) any {
		role := map[string]any{
			"name": name, "replicas": int64(replicas), "size": int64(r.cfg.Size),
			"instanceType": instanceType, "resources": map[string]any{"accelerator": int64(1)},
		}
		if kind != "" {
			role["kind"] = kind
		}
		return role
	}
	if r.cfg.Roles == 2 {
		return []any{role("prefill", "Prefill"), role("decode", "Decode")}
	}
	return []any{role("server", "")} // a Server, the default kind
}
