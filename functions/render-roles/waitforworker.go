package renderroles

import (
	corev1 "k8s.io/api/core/v1"

	"github.com/mdplane/mdplane/apis/engine"
	"github.com/mdplane/mdplane/apis/naming"
	workerv1 "github.com/mdplane/mdplane/apis/worker/v1"
)

// waitForWorker is the wait-for-worker container (one of the sidecars render-version covers; its
// shape is recorded in docs/decisions/0008-wait-for-worker.md): an init container of every member of a managed
// multi-member role, on the engine image's own python3. The members share one spec, so the member
// decides at run time: a worker returns at once, and the leader (member index 0) waits until the
// DNS name of every worker resolves behind the replica's headless Service, which publishes
// not-ready addresses, so the engine starts with its peers reachable instead of spending its
// startup budget on them. It prints the names it waits for. A worker that never comes breaks the
// replica, which the departures controller rebuilds.
func waitForWorker(image string, pullPolicy corev1.PullPolicy) corev1.Container {
	return corev1.Container{
		Name: naming.WaitForWorkerContainer, Image: image, ImagePullPolicy: pullPolicy,
		Command: []string{"python3", "-c", waitForWorkerScript},
	}
}

const waitForWorkerScript = `import os, socket, sys, time
if os.environ.get("` + engine.EnvMemberIndex + `", "0") != "0":
    sys.exit(0)
size = int(os.environ.get("` + engine.EnvReplicaSize + `", "1"))
leader = os.environ.get("` + engine.EnvLeaderAddress + `", "")
host, _, domain = leader.partition(".")
base = host[:-len("-m0")] if host.endswith("-m0") else host
workers = ["%s-m%d.%s" % (base, m, domain) for m in range(1, size)]
while True:
    missing = []
    for name in workers:
        try:
            socket.getaddrinfo(name, None)
        except OSError:
            missing.append(name)
    if not missing:
        sys.exit(0)
    print("waiting for workers: " + ", ".join(missing), flush=True)
    time.sleep(2)
`

// needsWaitForWorker reports a role whose leader waits for its workers: managed, more than one member.
func needsWaitForWorker(role workerv1.ModelDeploymentRole) bool {
	return !role.TakesOver() && role.Size > 1
}
