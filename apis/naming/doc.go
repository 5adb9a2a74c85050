// Package naming is the one home of how mdplane names and labels what it composes: the
// <md>-<role>-r<N>-m<M> scheme of Services, replicas and members, and the label sets and selectors
// the render writes and validation, the controllers, routers and status select on. The label keys
// and the Kueue pod-group name (GroupName) are the API's contract and stay in apis/worker/v1.
package naming
