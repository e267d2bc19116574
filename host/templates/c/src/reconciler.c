// {{name}}: marks each ConfigMap labelled `{{name}}=true` as reconciled and says so in an Event.
//
// Memory: the bindings hand the guest ownership of the request and of everything an import
// returns (call errors included); this file frees each exactly once. Strings passed *to* imports
// are only borrowed by the host. The error message returned from `reconcile` is allocated here
// and freed by the bindings after the host has read it.
//
// No stdio: snprintf and printf would link libc's stdio, which brings WASI stdout and
// filesystem imports into the component; sdk/text.h builds messages in fixed buffers instead.
#include <stdbool.h>
#include <string.h>

#include "json.h"
#include "reconciler.h"
#include "text.h"

// The annotation written on each object reconciled.
#define MARK "{{name}}.reconcile-host.dev/reconciled"
// Log lines and error messages are built in buffers of this size; longer ones are cut.
#define MESSAGE_MAX 1024

// A WIT string borrowing the NUL-terminated `string`, for passing to an import.
static reconciler_string_t borrowed(const char *string) {
  reconciler_string_t wit;
  reconciler_string_set(&wit, string);
  return wit;
}

static void add_wit(text *t, reconciler_string_t string) {
  text_add_n(t, (const char *)string.ptr, string.len);
}

// Appends a description of `error`, then frees it.
static void add_call_error(text *t, kube_reconcile_types_call_error_t *error) {
  switch (error->tag) {
    case KUBE_RECONCILE_TYPES_CALL_ERROR_DENIED:
      text_add(t, "denied: ");
      add_wit(t, error->val.denied);
      break;
    case KUBE_RECONCILE_TYPES_CALL_ERROR_INVALID:
      text_add(t, "invalid call: ");
      add_wit(t, error->val.invalid);
      break;
    case KUBE_RECONCILE_TYPES_CALL_ERROR_API:
      text_add(t, "the API server answered ");
      text_add_u64(t, error->val.api.code);
      text_add(t, " ");
      add_wit(t, error->val.api.reason);
      text_add(t, ": ");
      add_wit(t, error->val.api.message);
      break;
    case KUBE_RECONCILE_TYPES_CALL_ERROR_UNAVAILABLE:
      text_add(t, "the API server is unavailable: ");
      add_wit(t, error->val.unavailable);
      break;
  }
  kube_reconcile_types_call_error_free(error);
}

// A failed reconcile: "<what> <name>: <the call error>" (freed by the bindings); false.
static bool fail(reconciler_reconcile_error_t *err, const char *what,
                 const reconciler_string_t *name, kube_reconcile_types_call_error_t *error) {
  char buffer[MESSAGE_MAX];
  text message = text_in(buffer, sizeof buffer);
  text_add(&message, what);
  add_wit(&message, *name);
  text_add(&message, ": ");
  add_call_error(&message, error);
  reconciler_string_dup(&err->message, message.buffer);
  return false;
}

// Whether the object's annotation MARK is "true".
static bool marked(reconciler_string_t object) {
  json_span root, value;
  const char *const path[] = {"metadata", "annotations", MARK};
  return json_parse((const char *)object.ptr, object.len, &root) &&
         json_path(root, path, 3, &value) && json_string_equals(value, "true");
}

// Marks the request's object, records the Event and logs it.
static bool mark(kube_reconcile_types_object_ref_t *target, reconciler_reconcile_error_t *err) {
  kube_reconcile_client_patch_body_t body = {.tag = KUBE_RECONCILE_CLIENT_PATCH_BODY_MERGE};
  body.val.merge = borrowed("{\"metadata\":{\"annotations\":{\"" MARK "\":\"true\"}}}");
  reconciler_string_t stored;
  kube_reconcile_types_call_error_t error;
  if (!kube_reconcile_client_patch(target, &body, NULL, &stored, &error)) {
    return fail(err, "cannot mark ConfigMap ", &target->name, &error);
  }
  reconciler_string_free(&stored);
  reconciler_string_t reason = borrowed("Reconciled");
  reconciler_string_t note = borrowed("marked by {{name}}");
  if (!kube_reconcile_events_record_event(target, KUBE_RECONCILE_EVENTS_EVENT_TYPE_NORMAL, &reason,
                                          &note, &error)) {
    return fail(err, "cannot record the Event of ConfigMap ", &target->name, &error);
  }
  char buffer[MESSAGE_MAX];
  text line = text_in(buffer, sizeof buffer);
  text_add(&line, "marked ConfigMap ");
  add_wit(&line, target->name);
  reconciler_string_t message = borrowed(line.buffer);
  kube_reconcile_log_log(KUBE_RECONCILE_LOG_LEVEL_INFO, &message);
  return true;
}

bool exports_reconciler_reconcile(reconciler_request_t *request, reconciler_action_t *ret,
                                  reconciler_reconcile_error_t *err) {
  bool ok = true;
  ret->tag = KUBE_RECONCILE_TYPES_ACTION_DONE;
  // Absent: deleted, nothing to clean up. Marked already: writing again would only wake this
  // reconcile again.
  if (request->object.is_some && !marked(request->object.val)) {
    ok = mark(&request->target, err);
  }
  reconciler_request_free(request);
  return ok;
}
