package replicas

import (
	"fmt"
	"strconv"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/mdplane/mdplane/apis/composite/v1alpha1"
	"github.com/mdplane/mdplane/apis/engine"
	"github.com/mdplane/mdplane/apis/naming"
	workerv1 "github.com/mdplane/mdplane/apis/worker/v1"
)

// Replica names one instance of a role and the revision it is stamped from.
type Replica struct {
	Namespace  string
	Deployment string
	Role       string
	Ordinal    int32
	Revision   *v1alpha1.RoleRevision
}

// RenderMembers stamps the size Pods of a replica from its revision, and nothing else: a Pod is
// never copied from what the API server holds, whose Kueue gates, label and finalizer the project
// must not own.
func RenderMembers(r Replica) []*corev1.Pod {
	size := r.Revision.Size
	if size < 1 {
		size = 1
	}
	digest := r.Revision.Template.Annotations[workerv1.AnnotationPodSpecHash]
	pods := make([]*corev1.Pod, 0, size)
	for m := range size {
		pod := &corev1.Pod{ObjectMeta: *r.Revision.Template.ObjectMeta.DeepCopy(), Spec: *r.Revision.Template.Spec.DeepCopy()}
		pod.APIVersion, pod.Kind = "v1", "Pod"
		pod.Namespace = r.Namespace
		pod.Labels[workerv1.LabelPodGroupName] = workerv1.GroupName(r.Namespace, r.Deployment, r.Role, r.Ordinal)
		pod.Labels[workerv1.LabelPodOrdinal] = strconv.Itoa(int(r.Ordinal))
		pod.Labels[workerv1.LabelMemberIndex] = strconv.Itoa(int(m))
		if m == 0 {
			pod.Labels[workerv1.LabelServes] = "true" // every replica serves through its leader
		}
		pod.Annotations[workerv1.AnnotationPodSpecHash] = seatHash(digest, r.Ordinal, m)
		if size == 1 {
			pod.GenerateName = naming.RoleServiceName(r.Deployment, r.Role) + "-"
		} else {
			pod.Name = naming.MemberName(r.Deployment, r.Role, r.Ordinal, m)
			pod.Spec.Hostname = pod.Name
			pod.Spec.Subdomain = naming.InstanceName(r.Deployment, r.Role, r.Ordinal)
			addInstanceEnv(pod, r, size)
		}
		pods = append(pods, pod)
	}
	return pods
}

// addInstanceEnv tells the main container (and the wait-for-worker container, when the revision has
// one) its leader, the instance size and, through the downward API, its own index, so every member
// carries the same container spec.
func addInstanceEnv(pod *corev1.Pod, r Replica, size int32) {
	containers := make([]*corev1.Container, 0, len(pod.Spec.Containers)+len(pod.Spec.InitContainers))
	for i := range pod.Spec.Containers {
		if pod.Spec.Containers[i].Name == naming.MainContainer {
			containers = append(containers, &pod.Spec.Containers[i])
		}
	}
	for i := range pod.Spec.InitContainers {
		if pod.Spec.InitContainers[i].Name == naming.WaitForWorkerContainer {
			containers = append(containers, &pod.Spec.InitContainers[i])
		}
	}
	for _, c := range containers {
		instance := []corev1.EnvVar{
			{Name: engine.EnvLeaderAddress, Value: naming.LeaderAddress(r.Deployment, r.Role, r.Ordinal)},
			{Name: engine.EnvReplicaSize, Value: strconv.Itoa(int(size))},
			{Name: engine.EnvMemberIndex, ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{
				FieldPath: "metadata.labels['" + workerv1.LabelMemberIndex + "']",
			}}},
		}
		c.Env = append(instance, c.Env...)
	}
}

// RenderInstanceService is the headless Service that gives the members of a multi-member replica
// their DNS names; nil at size 1. Members resolve each other before they are Ready, and, through
// its finalizer, until the last of them has left.
func RenderInstanceService(r Replica) *corev1.Service {
	if r.Revision.Size <= 1 {
		return nil
	}
	name := naming.InstanceName(r.Deployment, r.Role, r.Ordinal)
	meta := objectMeta(r.Namespace, name, naming.ReplicaLabels(r.Deployment, r.Role, r.Ordinal))
	meta.Finalizers = []string{workerv1.FinalizerInstanceMembers}
	return &corev1.Service{
		TypeMeta:   typeMeta("v1", "Service"),
		ObjectMeta: meta,
		Spec: corev1.ServiceSpec{
			ClusterIP:                corev1.ClusterIPNone,
			PublishNotReadyAddresses: true,
			Selector:                 naming.ReplicaLabels(r.Deployment, r.Role, r.Ordinal),
		},
	}
}

// Materialize is everything a ModelReplica stands for on the API server: its member Pods and, at
// size 2 and above, its instance Service, each controlled by the replica. The members controller
// creates exactly these objects and `mdplane render` prints them, so the two cannot drift.
func Materialize(replica *v1alpha1.ModelReplica, revision *v1alpha1.RoleRevision) ([]*corev1.Pod, *corev1.Service) {
	spec := replica.Spec
	in := Replica{Namespace: replica.Namespace, Deployment: spec.DeploymentName, Role: spec.RoleName, Ordinal: spec.Ordinal, Revision: revision}
	owner := metav1.OwnerReference{
		APIVersion: v1alpha1.SchemeGroupVersion.String(), Kind: v1alpha1.ModelReplicaKind,
		Name: replica.Name, UID: replica.UID, Controller: ptr.To(true), BlockOwnerDeletion: ptr.To(true),
	}
	pods := RenderMembers(in)
	if e := revision.Elastic; e != nil && e.Part == v1alpha1.ElasticMembers {
		for _, pod := range pods {
			if !elasticMember(pod, e, spec.Ordinal, spec.ElasticBootWidth) {
				return nil, nil // a master without its boot width is held
			}
		}
	}
	for _, pod := range pods {
		pod.OwnerReferences = []metav1.OwnerReference{owner}
		// Placement, outside the pod-spec-hash: a bound PV's node affinity.
		applyNodeAffinity(&pod.Spec, spec.RequiredNodeAffinity)
	}
	svc := RenderInstanceService(in)
	if svc != nil {
		svc.OwnerReferences = []metav1.OwnerReference{owner}
	}
	return pods, svc
}

// seatHash is a Pod's pod-spec-hash: the role's configuration digest bound to the Pod's seat.
func seatHash(configDigest string, ordinal, member int32) string {
	return sha256Hex(fmt.Appendf(nil, `{"config":%q,"ordinal":%d,"member":%d}`, configDigest, ordinal, member))
}

// applyNodeAffinity ANDs a required node selector into a Pod's required node affinity: every term
// of the Pod's crossed with every term of the selector.
func applyNodeAffinity(spec *corev1.PodSpec, required *corev1.NodeSelector) {
	if required == nil || len(required.NodeSelectorTerms) == 0 {
		return
	}
	if spec.Affinity == nil {
		spec.Affinity = &corev1.Affinity{}
	}
	if spec.Affinity.NodeAffinity == nil {
		spec.Affinity.NodeAffinity = &corev1.NodeAffinity{}
	}
	na := spec.Affinity.NodeAffinity
	if na.RequiredDuringSchedulingIgnoredDuringExecution == nil || len(na.RequiredDuringSchedulingIgnoredDuringExecution.NodeSelectorTerms) == 0 {
		na.RequiredDuringSchedulingIgnoredDuringExecution = required.DeepCopy()
		return
	}
	var crossed []corev1.NodeSelectorTerm
	for _, a := range na.RequiredDuringSchedulingIgnoredDuringExecution.NodeSelectorTerms {
		for _, b := range required.NodeSelectorTerms {
			crossed = append(crossed, corev1.NodeSelectorTerm{
				MatchExpressions: append(append([]corev1.NodeSelectorRequirement(nil), a.MatchExpressions...), b.MatchExpressions...),
				MatchFields:      append(append([]corev1.NodeSelectorRequirement(nil), a.MatchFields...), b.MatchFields...),
			})
		}
	}
	na.RequiredDuringSchedulingIgnoredDuringExecution.NodeSelectorTerms = crossed
}
