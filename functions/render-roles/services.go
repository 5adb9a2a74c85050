package renderroles

import (
	"fmt"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/mdplane/mdplane/apis/naming"
	workerv1 "github.com/mdplane/mdplane/apis/worker/v1"
)

func typeMeta(apiVersion, kind string) metav1.TypeMeta {
	return metav1.TypeMeta{APIVersion: apiVersion, Kind: kind}
}

func objectMeta(namespace, name string, labels map[string]string) metav1.ObjectMeta {
	return metav1.ObjectMeta{Namespace: namespace, Name: name, Labels: labels}
}

// RenderRoleService is the Service <md>-<role> fronting a role's serving members (naming.Serving):
// its leaders, or every rank of an External-DP Server role; once eligible, only those carrying the
// eligibility label, and the Service is marked so that the term stays. Of an Elastic EP role only
// the master (ordinal 0) serves HTTP. name is the Service's name, so the deployment Service <md> is
// rendered by the same function for the first role.
func RenderRoleService(namespace, name, deployment, role string, r *RenderedRole, eligible bool) *corev1.Service {
	meta := objectMeta(namespace, name, naming.RoleLabels(deployment, role))
	if eligible {
		meta.Annotations = map[string]string{workerv1.AnnotationEndpointEligibility: workerv1.EndpointEligibilityActive}
	}
	selector := naming.Serving(naming.RoleLabels(deployment, role), r.ServesEveryMember, eligible)
	if r.Elastic != nil {
		selector[workerv1.LabelPodOrdinal] = "0"
	}
	return &corev1.Service{
		TypeMeta:   typeMeta("v1", "Service"),
		ObjectMeta: meta,
		Spec: corev1.ServiceSpec{
			Type:     corev1.ServiceTypeClusterIP,
			Selector: selector,
			Ports: []corev1.ServicePort{{
				Name:       "http",
				Protocol:   corev1.ProtocolTCP,
				Port:       r.ServicePort,
				TargetPort: intstr.FromInt32(r.TargetPort),
			}},
		},
	}
}

// Endpoint is the deployment's address: its Service, on the first role's published port, https when
// that role's engine serves TLS.
func Endpoint(namespace, deployment string, first *RenderedRole) string {
	return fmt.Sprintf("%s://%s.%s.svc:%d", first.Scheme, deployment, namespace, first.ServicePort)
}
