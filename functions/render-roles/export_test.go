package renderroles

// WaitForWorkerScript is the wait-for-worker container's program, for its tests.
var WaitForWorkerScript = func() string { return waitForWorkerScript }
