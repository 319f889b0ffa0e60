package v1alpha1

// Reasons of Lien and ClusterLien conditions and events about bad data,
// gone kinds, the per-object cap and cycles of liens.
const (
	// ReasonRepairedMarkers is the event, on the object and on every lien
	// it carries, when the controller rewrote malformed or foreign lien
	// markers from the liens that exist.
	ReasonRepairedMarkers = "RepairedMarkers"
	// ReasonMarkersMissing is Ready=False while an object the lien
	// protects lacks the lien's markers (the write failed).
	ReasonMarkersMissing = "MarkersMissing"
	// ReasonKindNotServed is Ready=False while a kind the lien names is
	// not served (its CRD not installed yet, or gone).
	ReasonKindNotServed = "KindNotServed"
	// ReasonTooManyLiens is Ready=False while an object the lien should
	// protect already carries the most liens one object may carry (32).
	ReasonTooManyLiens = "TooManyLiens"
	// ReasonCycleReleased is Held=False for a lien released because its
	// namespace is being deleted and it is on a cycle of liens whose
	// holders are each other's protected objects.
	ReasonCycleReleased = "CycleReleased"
	// ReasonReleaseRefused is Held=False while every holder is gone but
	// the API server refused to take the lien's markers off (Ready says
	// why): the objects stay protected until the write goes through.
	ReasonReleaseRefused = "ReleaseRefused"
)
