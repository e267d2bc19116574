// Test guest for the cross-language dispatch benchmark, in C: reads the request (the length of
// the object's JSON text) and answers `done`, nothing else, like the Rust guest `noop`.
#include "reconciler.h"

// Read by every call so the compiler cannot drop the read of the request.
volatile size_t last_object_len;

bool exports_reconciler_reconcile(reconciler_request_t *request, reconciler_action_t *action,
                                  reconciler_reconcile_error_t *error) {
  (void)error;
  last_object_len = request->object.is_some ? request->object.val.len : 0;
  reconciler_request_free(request);  // the request's strings belong to the guest
  action->tag = KUBE_RECONCILE_TYPES_ACTION_DONE;
  return true;
}
