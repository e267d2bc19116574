// Test guest for the cross-language dispatch benchmark: the cheapest JavaScript reconciler. It
// reads the request (the length of the object's JSON text) and answers `done`; it calls no import.

export function reconcile(request) {
  const length = request.object == null ? 0 : request.object.length;
  return length >= 0 ? { tag: 'done' } : { tag: 'requeue' };
}
