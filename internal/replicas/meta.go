package replicas

import (
	"crypto/sha256"
	"encoding/hex"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// The probes of every rendered engine container: the role's render and an elastic master's
// liveness, which accepts a resize in flight, share the route and the cadence.
const (
	HealthPath          = "/health"
	ProbePeriodSeconds  = 10
	ProbeTimeoutSeconds = 5
	LivenessFailures    = 6
)

// sha256Hex is the SHA-256 hex digest of b.
func sha256Hex(b []byte) string {
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:])
}

func typeMeta(apiVersion, kind string) metav1.TypeMeta {
	return metav1.TypeMeta{APIVersion: apiVersion, Kind: kind}
}

func objectMeta(namespace, name string, labels map[string]string) metav1.ObjectMeta {
	return metav1.ObjectMeta{Namespace: namespace, Name: name, Labels: labels}
}
