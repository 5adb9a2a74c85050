package cluster

import "time"

// The e2e suite's stack runs with SuiteOptions: the suite's TestMain starts a stack of its own with
// them, and make cluster-up STACK_ARGS=--e2e starts one that a test process attaches to (Reattach).
const (
	// SuiteParkAfter is the controllers' --park-after: short enough for a test to watch a set being
	// parked, long enough for the others to finish holding a set on purpose on a loaded machine
	// (TestJointAdmission holds one while a second deployment starts beside it).
	SuiteParkAfter = 90 * time.Second
	// SuiteArtifactRetry is the controllers' --model-artifact-retry-interval: a ModelArtifact the hub
	// refused is asked again after it rather than 5 minutes, so that a test can watch a rollout
	// resume once the hub learns the repository.
	SuiteArtifactRetry = 5 * time.Second
	// SuiteOwnQueuesLabel on an InstanceType keeps mdplane from managing its queues (the controllers
	// run with --queue-instance-types=SuiteOwnQueuesLabel!=true): the test that applies such a type
	// makes its own ClusterQueue and LocalQueue with the quota it needs. Unlabelled types are
	// managed, as on a real cluster.
	SuiteOwnQueuesLabel = "mdplane.test/own-queues"
)

// SuiteOptions are the e2e suite's stack options, without a Log.
func SuiteOptions() Options {
	return Options{
		CrossplanePollInterval: 30 * time.Second,
		// Room for the parallel tests' peaks at once (make test runs E2E_PARALLEL of them): each
		// holds at most 9 GPUs and most 2 to 4; the nodes alternate A10G and H20, 8 GPUs each.
		Nodes: 10,
		ControllerArgs: []string{"--park-after=" + SuiteParkAfter.String(), "--queue-instance-types=" + SuiteOwnQueuesLabel + "!=true",
			"--model-artifact-retry-interval=" + SuiteArtifactRetry.String()},
	}
}
