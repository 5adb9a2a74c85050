// Package budgets keeps each ModelRole's PodDisruptionBudget, so a drain takes one replica of a role
// at a time, outside the composition: the budget's status moves with every member.
package budgets
