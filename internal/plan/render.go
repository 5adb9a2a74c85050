package plan

import (
	"fmt"
	"strconv"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	kueue "sigs.k8s.io/kueue/apis/kueue/v1beta2"

	"github.com/mdplane/mdplane/apis/composite/v1alpha1"
	workerv1 "github.com/mdplane/mdplane/apis/worker/v1"
	"github.com/mdplane/mdplane/internal/workload"
)

// Render is one ModelDeployment rendered down to its Pods: what the plan compares and counts.
type Render struct {
	Deployment *workerv1.ModelDeployment
	Roles      []v1alpha1.ModelRole
	Replicas   []v1alpha1.ModelReplica
	Pods       []corev1.Pod
}

// RenderOf reads a render's objects (the pipeline's output, in any order) into a Render; objects of
// other kinds are ignored.
func RenderOf(objects []*unstructured.Unstructured) (Render, error) {
	var r Render
	for _, obj := range objects {
		gvk := obj.GroupVersionKind()
		var into any
		switch {
		case gvk == workerv1.SchemeGroupVersion.WithKind(workerv1.ModelDeploymentKind):
			r.Deployment = &workerv1.ModelDeployment{}
			into = r.Deployment
		case gvk == v1alpha1.SchemeGroupVersion.WithKind("ModelRole"):
			r.Roles = append(r.Roles, v1alpha1.ModelRole{})
			into = &r.Roles[len(r.Roles)-1]
		case gvk == v1alpha1.SchemeGroupVersion.WithKind("ModelReplica"):
			r.Replicas = append(r.Replicas, v1alpha1.ModelReplica{})
			into = &r.Replicas[len(r.Replicas)-1]
		case gvk.Group == "" && gvk.Kind == "Pod":
			r.Pods = append(r.Pods, corev1.Pod{})
			into = &r.Pods[len(r.Pods)-1]
		default:
			continue
		}
		if err := runtime.DefaultUnstructuredConverter.FromUnstructured(obj.Object, into); err != nil {
			return Render{}, fmt.Errorf("%s %s/%s: %w", gvk.Kind, obj.GetNamespace(), obj.GetName(), err)
		}
	}
	for i := range r.Replicas {
		// Offline there is no API server to generate a name; the generateName stem stands in.
		if r.Replicas[i].Name == "" {
			r.Replicas[i].Name = trimDash(r.Replicas[i].GenerateName)
		}
	}
	if r.Deployment == nil {
		return Render{}, fmt.Errorf("the render holds no ModelDeployment")
	}
	return r, nil
}

func trimDash(s string) string {
	if n := len(s); n > 0 && s[n-1] == '-' {
		return s[:n-1]
	}
	return s
}

// role is the rendered ModelRole of a role name, or nil.
func (r Render) role(name string) *v1alpha1.ModelRole {
	for i := range r.Roles {
		if r.Roles[i].Spec.RoleName == name {
			return &r.Roles[i]
		}
	}
	return nil
}

// replicasOf is the rendered ModelReplicas of a role.
func (r Render) replicasOf(role string) []v1alpha1.ModelReplica {
	var out []v1alpha1.ModelReplica
	for _, rep := range r.Replicas {
		if rep.Spec.RoleName == role {
			out = append(out, rep)
		}
	}
	return out
}

// podsOf is the rendered Pods of one replica (ordinal) of a role.
func (r Render) podsOf(role string, ordinal int32) []corev1.Pod {
	var out []corev1.Pod
	for _, p := range r.Pods {
		if p.Labels[workerv1.LabelComponent] == role && p.Labels[workerv1.LabelPodOrdinal] == strconv.Itoa(int(ordinal)) {
			out = append(out, p)
		}
	}
	return out
}

// leader is member 0 of replica 0 of a role: the Pod whose diff the plan shows.
func (r Render) leader(role string) *corev1.Pod {
	for _, p := range r.podsOf(role, 0) {
		if m := p.Labels[workerv1.LabelMemberIndex]; m == "" || m == "0" {
			return &p
		}
	}
	return nil
}

// QueueName is the LocalQueue the deployment's Pods are queued in, read from its rendered Pods; empty
// when none is rendered.
func (r Render) QueueName() string {
	for _, p := range r.Pods {
		if q := p.Labels[workerv1.LabelQueueName]; q != "" {
			return q
		}
	}
	for _, role := range r.Roles {
		if q := role.Spec.Template.Labels[workerv1.LabelQueueName]; q != "" {
			return q
		}
	}
	return ""
}

// requests sums the requests of Pods (init containers counted as the scheduler does: the larger of
// their maximum and the containers' sum) plus each Pod's overhead.
func requests(pods []corev1.Pod) corev1.ResourceList {
	total := corev1.ResourceList{}
	for _, p := range pods {
		pod := corev1.ResourceList{}
		for _, c := range p.Spec.Containers {
			add(pod, c.Resources.Requests)
		}
		for _, c := range p.Spec.InitContainers {
			if c.RestartPolicy != nil && *c.RestartPolicy == corev1.ContainerRestartPolicyAlways {
				add(pod, c.Resources.Requests) // a sidecar runs beside the containers
			}
		}
		for _, c := range p.Spec.InitContainers {
			if c.RestartPolicy != nil && *c.RestartPolicy == corev1.ContainerRestartPolicyAlways {
				continue
			}
			for name, q := range c.Resources.Requests {
				if have, ok := pod[name]; !ok || q.Cmp(have) > 0 {
					pod[name] = q.DeepCopy()
				}
			}
		}
		add(pod, p.Spec.Overhead)
		add(total, pod)
	}
	return total
}

func add(into, more corev1.ResourceList) {
	for name, q := range more {
		have := into[name]
		have.Add(q)
		into[name] = have
	}
}

// FreeOf is what a ClusterQueue has free now: its nominal quota minus what its Workloads reserve
// (Kueue admits against reservations, which include the admitted Workloads' usage), per flavor and
// resource, summed per resource over its flavors. The reservation is the larger of what the queue's
// status last reported and what the given Workloads (the deployment's namespace) hold on it now:
// Kueue writes the status a moment after it admits, so a plan made just after an admission would
// otherwise count the newest Workloads' cards as free. Borrowing and cohorts are not counted.
func FreeOf(cq *kueue.ClusterQueue, workloads []kueue.Workload) corev1.ResourceList {
	held := reservedBy(cq.Name, workloads)
	free := corev1.ResourceList{}
	for _, group := range cq.Spec.ResourceGroups {
		for _, flavor := range group.Flavors {
			for _, r := range flavor.Resources {
				q := r.NominalQuota.DeepCopy()
				used := usage(cq, string(flavor.Name), r.Name)
				if h := held[string(flavor.Name)][r.Name]; h.Cmp(used) > 0 {
					used = h
				}
				q.Sub(used)
				if q.Sign() < 0 {
					q.Set(0)
				}
				have := free[r.Name]
				have.Add(q)
				free[r.Name] = have
			}
		}
	}
	return free
}

// reservedBy is what the Workloads holding a quota reservation on the ClusterQueue reserve, by
// flavor and resource.
func reservedBy(clusterQueue string, workloads []kueue.Workload) map[string]corev1.ResourceList {
	out := map[string]corev1.ResourceList{}
	for _, wl := range workloads {
		a := wl.Status.Admission
		if a == nil || string(a.ClusterQueue) != clusterQueue || !workload.QuotaReserved(&wl) {
			continue
		}
		for _, ps := range a.PodSetAssignments {
			for res, q := range ps.ResourceUsage {
				flavor := string(ps.Flavors[res])
				if out[flavor] == nil {
					out[flavor] = corev1.ResourceList{}
				}
				have := out[flavor][res]
				have.Add(q)
				out[flavor][res] = have
			}
		}
	}
	return out
}

// usage is the larger of a flavor's reserved and used amount of a resource, as the queue's status
// reports them.
func usage(cq *kueue.ClusterQueue, flavor string, res corev1.ResourceName) resource.Quantity {
	var most resource.Quantity
	for _, list := range [][]kueue.FlavorUsage{cq.Status.FlavorsReservation, cq.Status.FlavorsUsage} {
		for _, f := range list {
			for _, r := range f.Resources {
				if string(f.Name) == flavor && r.Name == res && r.Total.Cmp(most) > 0 {
					most = r.Total
				}
			}
		}
	}
	return most
}
