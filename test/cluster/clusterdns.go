package cluster

import (
	"context"
	"fmt"
	"strings"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"
)

// clusterDNS is the real node's cluster DNS as kubeadm installs CoreDNS: its own ServiceAccount and
// rights, the kube-dns Service at DNSServiceIP, and a Corefile that answers for the cluster's
// domain only (the binary has no forward plugin). The server listens on 1053, which its non-root
// user may bind; the Service maps port 53 to it.
const clusterDNS = `apiVersion: v1
kind: ServiceAccount
metadata: {name: coredns, namespace: kube-system}
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata: {name: "system:coredns"}
rules:
  - apiGroups: [""]
    resources: [endpoints, services, pods, namespaces]
    verbs: [list, watch]
  - apiGroups: [discovery.k8s.io]
    resources: [endpointslices]
    verbs: [list, watch]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRoleBinding
metadata: {name: "system:coredns"}
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: "system:coredns"}
subjects: [{kind: ServiceAccount, name: coredns, namespace: kube-system}]
---
apiVersion: v1
kind: ConfigMap
metadata: {name: coredns, namespace: kube-system}
data:
  Corefile: |
    .:1053 {
        errors
        health {
            lameduck 5s
        }
        ready
        kubernetes {{.Domain}} in-addr.arpa ip6.arpa {
            pods insecure
            fallthrough in-addr.arpa ip6.arpa
        }
        cache 30
        loadbalance
    }
---
apiVersion: apps/v1
kind: Deployment
metadata:
  name: coredns
  namespace: kube-system
  labels: {k8s-app: kube-dns}
spec:
  replicas: 1
  selector:
    matchLabels: {k8s-app: kube-dns}
  template:
    metadata:
      labels: {k8s-app: kube-dns}
    spec:
      serviceAccountName: coredns
      priorityClassName: system-cluster-critical
      dnsPolicy: Default
      tolerations:
        - {key: CriticalAddonsOnly, operator: Exists}
      containers:
        - name: coredns
          image: {{.Image}}
          args: [-conf, /etc/coredns/Corefile]
          ports:
            - {name: dns, containerPort: 1053, protocol: UDP}
            - {name: dns-tcp, containerPort: 1053, protocol: TCP}
          livenessProbe:
            httpGet: {path: /health, port: 8080}
          readinessProbe:
            httpGet: {path: /ready, port: 8181}
          resources:
            requests: {cpu: 50m, memory: 64Mi}
            limits: {memory: 170Mi}
          securityContext:
            allowPrivilegeEscalation: false
            readOnlyRootFilesystem: true
            runAsNonRoot: true
            capabilities: {drop: [ALL]}
          volumeMounts:
            - {name: config, mountPath: /etc/coredns, readOnly: true}
      volumes:
        - name: config
          configMap: {name: coredns}
---
apiVersion: v1
kind: Service
metadata:
  name: kube-dns
  namespace: kube-system
  labels: {k8s-app: kube-dns, kubernetes.io/name: CoreDNS}
spec:
  selector: {k8s-app: kube-dns}
  clusterIP: {{.IP}}
  ports:
    - {name: dns, port: 53, targetPort: 1053, protocol: UDP}
    - {name: dns-tcp, port: 53, targetPort: 1053, protocol: TCP}
`

// startClusterDNS installs the cluster DNS on the real node and waits until it answers.
func (s *Stack) startClusterDNS(ctx context.Context) error {
	manifest, err := render(clusterDNS, map[string]string{"Domain": ClusterDomain, "Image": CoreDNSImage, "IP": DNSServiceIP})
	if err != nil {
		return err
	}
	if err := s.applyManifests(ctx, "mdplane-stack", manifest); err != nil {
		return err
	}
	return waitFor(ctx, nil, 2*time.Minute, "the cluster DNS", func() error {
		return s.deploymentAvailable(ctx, "kube-system", "coredns")
	})
}

// applyManifests applies YAML documents server-side as fieldOwner.
func (s *Stack) applyManifests(ctx context.Context, fieldOwner, manifests string) error {
	for _, doc := range strings.Split(manifests, "\n---\n") {
		obj := map[string]any{}
		if err := yaml.Unmarshal([]byte(doc), &obj); err != nil {
			return fmt.Errorf("%w\n%s", err, doc)
		}
		if len(obj) == 0 {
			continue
		}
		u := &unstructured.Unstructured{Object: obj}
		if err := s.Client.Apply(ctx, client.ApplyConfigurationFromUnstructured(u), client.FieldOwner(fieldOwner), client.ForceOwnership); err != nil {
			return fmt.Errorf("applying %s %s/%s: %w", u.GetKind(), u.GetNamespace(), u.GetName(), err)
		}
	}
	return nil
}

// deploymentAvailable passes once a Deployment's replicas are all updated and available.
func (s *Stack) deploymentAvailable(ctx context.Context, namespace, name string) error {
	d := &appsv1.Deployment{}
	if err := s.Client.Get(ctx, types.NamespacedName{Namespace: namespace, Name: name}, d); err != nil {
		return err
	}
	want := int32(1)
	if d.Spec.Replicas != nil {
		want = *d.Spec.Replicas
	}
	if d.Status.ObservedGeneration < d.Generation || d.Status.UpdatedReplicas < want || d.Status.AvailableReplicas < want {
		return fmt.Errorf("deployment %s/%s: %d of %d replicas updated, %d available", namespace, name,
			d.Status.UpdatedReplicas, want, d.Status.AvailableReplicas)
	}
	return nil
}
