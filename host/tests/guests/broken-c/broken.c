// The broken-c test guest, for `reconcile-host check`'s tests: a C reconciler whose mistake is
// chosen by whether the object's JSON text holds a marker (no JSON parser, to stay small):
//   "fault":"assert"  an assert() fails: wasi-libc writes the assertion to stderr (the host's
//                     log) and aborts, a trap
//   "fault":"error"   returns false with a message: a reconcile error, which check does not
//                     count as a failure
//   otherwise         done
#include <assert.h>
#include <string.h>

#include "reconciler.h"

static bool holds(const reconciler_request_t *request, const char *marker) {
  if (!request->object.is_some) {
    return false;
  }
  const reconciler_string_t *text = &request->object.val;
  size_t length = strlen(marker);
  for (size_t i = 0; i + length <= text->len; i++) {
    if (memcmp(text->ptr + i, marker, length) == 0) {
      return true;
    }
  }
  return false;
}

bool exports_reconciler_reconcile(reconciler_request_t *request, reconciler_action_t *action,
                                  reconciler_reconcile_error_t *error) {
  bool broken_invariant = holds(request, "\"fault\":\"assert\"");
  bool fail = holds(request, "\"fault\":\"error\"");
  reconciler_request_free(request);  // the request's strings belong to the guest
  assert(!broken_invariant && "broken-c: asked to break an invariant");
  if (fail) {
    reconciler_string_dup(&error->message, "broken-c: asked to fail");
    return false;
  }
  action->tag = KUBE_RECONCILE_TYPES_ACTION_DONE;
  return true;
}
