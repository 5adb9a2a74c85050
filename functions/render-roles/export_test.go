package renderroles

// WaitForWorkerScript is the wait-for-worker container's program, for its tests.
var WaitForWorkerScript = func() string { return waitForWorkerScript }

// ObservedRetirement lifts the deployment's retirement operation from its ModelRoles, for its tests.
var ObservedRetirement = observedRetirement
