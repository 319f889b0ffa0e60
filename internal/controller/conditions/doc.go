// Package conditions is how the lien and teardown controllers write their
// status conditions: Set sets one for the object's generation and says
// whether it changed; Ready sums the domain conditions up in Ready, the
// way Cluster API's summary does — True only when none is bad, otherwise
// False with the reason of the first bad one and what each bad one says.
// Condition types and reasons are declared once, in api/v1alpha1.
package conditions
