package snapshot

import (
	"fmt"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"

	"github.com/mdplane/mdplane/apis/composite/v1alpha1"
	workerv1 "github.com/mdplane/mdplane/apis/worker/v1"
)

const mdUID = types.UID("md-uid")

// deployment is a ModelDeployment md in team-a with the given roles (name:kind:replicas).
func deployment(engine workerv1.Engine, router workerv1.RouterName, roles ...workerv1.ModelDeploymentRole) *workerv1.ModelDeployment {
	md := &workerv1.ModelDeployment{ObjectMeta: metav1.ObjectMeta{Name: "md", Namespace: "team-a", UID: mdUID}}
	md.Spec.Engine.Name = engine
	md.Spec.Roles = roles
	if router != "" {
		md.Spec.Router = &workerv1.ModelDeploymentRouter{Name: router}
	}
	return md
}

func role(name string, kind workerv1.RoleKind, replicas int32) workerv1.ModelDeploymentRole {
	return workerv1.ModelDeploymentRole{Name: name, Kind: kind, Replicas: replicas}
}

// chain is the owner references of a world of Pods: Pods are added with their intermediate objects.
type chain struct {
	owners Owners
	pods   []corev1.Pod
}

func newChain() *chain { return &chain{owners: Owners{}} }

func ctl(apiVersion, kind, name string, uid types.UID) metav1.OwnerReference {
	return metav1.OwnerReference{APIVersion: apiVersion, Kind: kind, Name: name, UID: uid, Controller: ptr.To(true)}
}

// engine adds an engine Pod of role owned by a replica of a ModelRole owned by the deployment uid.
func (c *chain) engine(name, roleName string, owner types.UID) *corev1.Pod {
	replica, modelRole := types.UID("replica-"+name), types.UID("role-"+roleName)
	c.owners[replica] = ctl(v1alpha1.SchemeGroupVersion.String(), v1alpha1.ModelRoleKind, "md-"+roleName, modelRole)
	c.owners[modelRole] = ctl("worker.gpustack.ai/v1", workerv1.ModelDeploymentKind, "md", owner)
	p := pod(name, map[string]string{workerv1.LabelComponent: roleName})
	p.OwnerReferences = []metav1.OwnerReference{ctl(v1alpha1.SchemeGroupVersion.String(), v1alpha1.ModelReplicaKind, name+"-replica", replica)}
	c.pods = append(c.pods, *p)
	return &c.pods[len(c.pods)-1]
}

// router adds a router Pod of a ReplicaSet of the Deployment deploy owned by the deployment.
func (c *chain) router(name string, router workerv1.RouterName, deploy string) *corev1.Pod {
	rs, d := types.UID("rs-"+name), types.UID("deploy-"+deploy)
	c.owners[rs] = ctl("apps/v1", "Deployment", deploy, d)
	c.owners[d] = ctl("worker.gpustack.ai/v1", workerv1.ModelDeploymentKind, "md", mdUID)
	p := pod(name, map[string]string{workerv1.LabelRouter: string(router)})
	p.OwnerReferences = []metav1.OwnerReference{ctl("apps/v1", "ReplicaSet", deploy+"-abc", rs)}
	c.pods = append(c.pods, *p)
	return &c.pods[len(c.pods)-1]
}

func pod(name string, extra map[string]string) *corev1.Pod {
	l := map[string]string{workerv1.LabelName: workerv1.NameModelDeployment, workerv1.LabelInstance: "md"}
	for k, v := range extra {
		l[k] = v
	}
	return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "team-a", UID: types.UID("uid-" + name), Labels: l}}
}

// text is a /metrics body from lines, parsed.
func text(t *testing.T, lines ...string) Families {
	t.Helper()
	f, err := Parse(strings.NewReader(strings.Join(lines, "\n") + "\n"))
	if err != nil {
		t.Fatal(err)
	}
	return f
}

// histogram is a typed histogram's lines with one bucket.
func histogram(name string, count, sum float64) []string {
	return []string{"# TYPE " + name + " histogram",
		fmt.Sprintf("%s_bucket{le=\"+Inf\"} %g", name, count),
		fmt.Sprintf("%s_sum %g", name, sum), fmt.Sprintf("%s_count %g", name, count)}
}

func lines(groups ...[]string) []string {
	var out []string
	for _, g := range groups {
		out = append(out, g...)
	}
	return out
}

func formatFloat(v float64) string { return fmt.Sprintf("%g", v) }
