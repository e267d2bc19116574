// Package events records Kubernetes Events about objects (the `events` import), as
// `kubectl describe` shows them.
package events

import "reconcile-host/guest"

// Record records an event about regarding: reason is a short UpperCamelCase word ("Synced"),
// note a sentence (at most 1 KB is kept).
func Record(regarding guest.ObjectRef, eventType guest.EventType, reason, note string) error {
	return guest.CurrentHost().RecordEvent(regarding, eventType, reason, note)
}
