// ttl-reaper-c: deletes ConfigMaps whose time to live has passed.
//
// A ConfigMap labelled `ttl.example.com/enabled=true` (the manifest's labelSelector) with the
// annotation `ttl.example.com/after: "<seconds>"` is deleted once `metadata.creationTimestamp`
// plus that many seconds has passed; until then the reconciler asks to look again when it
// expires. ConfigMaps in namespaces labelled `ttl.example.com/paused=true` are left alone.
//
// Memory: the bindings hand the guest ownership of the request and of everything an import
// returns (call errors included); this file frees each exactly once. Strings passed *to* imports
// are only borrowed by the host. The error message returned from `reconcile` is allocated here
// and freed by the bindings after the host has read it (the export's post-return function).
#include <stdint.h>
#include <string.h>
#include <time.h>

#include "json.h"
#include "reconciler.h"
#include "text.h"
#include "timestamp.h"

#define LABEL_PAUSED "ttl.example.com/paused"
#define ANNOTATION_AFTER "ttl.example.com/after"
// The longest time to live accepted: 100 years, in seconds.
#define TTL_MAX_SECONDS UINT64_C(3155760000)
// Log lines, event notes and error messages are built in buffers of this size; longer ones are
// cut (the host keeps at most 1 KB of an event's note anyway).
#define MESSAGE_MAX 1024

typedef kube_reconcile_types_call_error_t call_error_t;
typedef kube_reconcile_types_object_ref_t object_ref_t;

// A WIT string borrowing the NUL-terminated `string`, for passing to an import.
static reconciler_string_t borrowed(const char *string) {
  reconciler_string_t wit;
  reconciler_string_set(&wit, string);
  return wit;
}

static void add_wit(text *t, reconciler_string_t string) {
  text_add_n(t, (const char *)string.ptr, string.len);
}

// Appends "ConfigMap <namespace>/<name>".
static void add_config_map(text *t, const object_ref_t *target) {
  text_add(t, "ConfigMap ");
  if (target->namespace_.is_some) {
    add_wit(t, target->namespace_.val);
    text_add(t, "/");
  }
  add_wit(t, target->name);
}

static void log_text(kube_reconcile_log_level_t level, const text *message) {
  reconciler_string_t wit = borrowed(message->buffer);
  kube_reconcile_log_log(level, &wit);
}

// Appends a description of `error`, then frees it.
static void add_call_error(text *t, call_error_t *error) {
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
    default:
      text_add(t, "unknown call error ");
      text_add_u64(t, error->tag);
      break;
  }
  kube_reconcile_types_call_error_free(error);
}

static bool done(reconciler_action_t *action) {
  action->tag = KUBE_RECONCILE_TYPES_ACTION_DONE;
  return true;
}

static bool requeue_after(reconciler_action_t *action, uint32_t milliseconds) {
  action->tag = KUBE_RECONCILE_TYPES_ACTION_REQUEUE_AFTER;
  action->val.requeue_after = milliseconds;
  return true;
}

// A failed reconcile: copies `message` into `error` (freed by the bindings) and returns false.
static bool fail(reconciler_reconcile_error_t *error, const text *message) {
  reconciler_string_dup(&error->message, message->buffer);
  return false;
}

// The wall clock in milliseconds since the Unix epoch (WASI wall-clock).
static int64_t now_milliseconds(void) {
  struct timespec now;
  if (timespec_get(&now, TIME_UTC) != TIME_UTC) return 0;
  return (int64_t)now.tv_sec * 1000 + now.tv_nsec / 1000000;
}

// Parses a time to live: decimal digits only, at most TTL_MAX_SECONDS.
static bool parse_ttl_seconds(const char *string, uint64_t *seconds) {
  if (*string == '\0') return false;
  uint64_t value = 0;
  for (const char *digit = string; *digit != '\0'; digit++) {
    if (*digit < '0' || *digit > '9') return false;
    value = value * 10 + (uint64_t)(*digit - '0');
    if (value > TTL_MAX_SECONDS) return false;
  }
  *seconds = value;
  return true;
}

// Whether the cached Namespace `name` is labelled paused. A namespace missing from the cache
// (not yet seen, or gone) is not paused.
static bool namespace_paused(reconciler_string_t *name, bool *paused,
                             reconciler_reconcile_error_t *error) {
  kube_reconcile_cache_kind_t kind = {borrowed("v1"), borrowed("Namespace")};
  reconciler_option_string_t found;
  call_error_t call_error;
  *paused = false;
  if (!kube_reconcile_cache_get(&kind, NULL, name, &found, &call_error)) {
    char buffer[MESSAGE_MAX];
    text message = text_in(buffer, sizeof buffer);
    text_add(&message, "reading Namespace ");
    add_wit(&message, *name);
    text_add(&message, " from the cache failed: ");
    add_call_error(&message, &call_error);
    return fail(error, &message);
  }
  if (found.is_some) {
    static const char *const paused_label[] = {"metadata", "labels", LABEL_PAUSED};
    json_span namespace_object, label;
    *paused = json_parse((const char *)found.val.ptr, found.val.len, &namespace_object) &&
              json_path(namespace_object, paused_label, 3, &label) &&
              json_string_equals(label, "true");
    reconciler_option_string_free(&found);
  }
  return true;
}

// Reports an unusable TTL annotation with a Warning event on the ConfigMap; done, since
// retrying cannot fix it (a change to the annotation starts a new reconcile).
static bool reject_ttl(object_ref_t *target, const text *note, reconciler_action_t *action,
                       reconciler_reconcile_error_t *error) {
  char buffer[MESSAGE_MAX];
  text line = text_in(buffer, sizeof buffer);
  add_config_map(&line, target);
  text_add(&line, ": ");
  text_add(&line, note->buffer);
  log_text(KUBE_RECONCILE_LOG_LEVEL_WARN, &line);

  reconciler_string_t reason = borrowed("InvalidTTL");
  reconciler_string_t note_wit = borrowed(note->buffer);
  call_error_t call_error;
  if (!kube_reconcile_events_record_event(target, KUBE_RECONCILE_EVENTS_EVENT_TYPE_WARNING,
                                          &reason, &note_wit, &call_error)) {
    text message = text_in(buffer, sizeof buffer);
    text_add(&message, "recording the InvalidTTL event of ");
    add_config_map(&message, target);
    text_add(&message, " failed: ");
    add_call_error(&message, &call_error);
    return fail(error, &message);
  }
  return done(action);
}

static bool delete_expired(object_ref_t *target, uint64_t ttl_seconds,
                           reconciler_action_t *action, reconciler_reconcile_error_t *error) {
  char buffer[MESSAGE_MAX];
  call_error_t call_error;
  if (!kube_reconcile_client_delete(target, &call_error)) {
    if (call_error.tag == KUBE_RECONCILE_TYPES_CALL_ERROR_API && call_error.val.api.code == 404) {
      kube_reconcile_types_call_error_free(&call_error);
      return done(action);  // someone else deleted it first
    }
    text message = text_in(buffer, sizeof buffer);
    text_add(&message, "deleting expired ");
    add_config_map(&message, target);
    text_add(&message, " failed: ");
    add_call_error(&message, &call_error);
    return fail(error, &message);
  }
  text line = text_in(buffer, sizeof buffer);
  text_add(&line, "deleted ");
  add_config_map(&line, target);
  text_add(&line, ": its time to live of ");
  text_add_u64(&line, ttl_seconds);
  text_add(&line, " s has passed");
  log_text(KUBE_RECONCILE_LOG_LEVEL_INFO, &line);
  return done(action);
}

static bool reconcile(reconciler_request_t *request, reconciler_action_t *action,
                      reconciler_reconcile_error_t *error) {
  object_ref_t *target = &request->target;
  if (!request->object.is_some || !target->namespace_.is_some) {
    return done(action);  // deleted already (ConfigMaps are always namespaced)
  }
  char buffer[MESSAGE_MAX];
  json_span object, field;
  if (!json_parse((const char *)request->object.val.ptr, request->object.val.len, &object) ||
      json_type_of(object) != JSON_OBJECT) {
    text message = text_in(buffer, sizeof buffer);
    add_config_map(&message, target);
    text_add(&message, ": the cached object is not a JSON object");
    return fail(error, &message);
  }
  static const char *const deletion_timestamp[] = {"metadata", "deletionTimestamp"};
  if (json_path(object, deletion_timestamp, 2, &field) && json_type_of(field) != JSON_NULL) {
    return done(action);  // being deleted already
  }

  bool paused;
  if (!namespace_paused(&target->namespace_.val, &paused, error)) return false;
  if (paused) {
    text line = text_in(buffer, sizeof buffer);
    text_add(&line, "skipping ");
    add_config_map(&line, target);
    text_add(&line, ": its namespace is labelled " LABEL_PAUSED "=true");
    log_text(KUBE_RECONCILE_LOG_LEVEL_INFO, &line);
    return done(action);
  }

  static const char *const after[] = {"metadata", "annotations", ANNOTATION_AFTER};
  char ttl_string[24];
  uint64_t ttl_seconds;
  if (!json_path(object, after, 3, &field)) {
    text note = text_in(buffer, sizeof buffer);
    text_add(&note, "annotation " ANNOTATION_AFTER " is missing; set it to the number of "
                    "seconds the ConfigMap may live");
    return reject_ttl(target, &note, action, error);
  }
  if (!json_string_copy(field, ttl_string, sizeof ttl_string) ||
      !parse_ttl_seconds(ttl_string, &ttl_seconds)) {
    char shown[64];
    text note = text_in(buffer, sizeof buffer);
    text_add(&note, "annotation " ANNOTATION_AFTER " is ");
    if (json_string_copy(field, shown, sizeof shown)) {
      text_add(&note, "\"");
      text_add(&note, shown);
      text_add(&note, "\"");
    } else {
      text_add(&note, "too long or not a string");
    }
    text_add(&note, "; it must be a whole number of seconds from 0 to ");
    text_add_u64(&note, TTL_MAX_SECONDS);
    return reject_ttl(target, &note, action, error);
  }

  static const char *const creation_timestamp[] = {"metadata", "creationTimestamp"};
  char created_string[64];
  int64_t created_seconds;
  if (!json_path(object, creation_timestamp, 2, &field) ||
      !json_string_copy(field, created_string, sizeof created_string) ||
      !timestamp_parse(created_string, strlen(created_string), &created_seconds)) {
    // Only an object that did not come from an API server lacks one; retrying will not help.
    text line = text_in(buffer, sizeof buffer);
    add_config_map(&line, target);
    text_add(&line, " has no valid metadata.creationTimestamp; its age is unknown");
    log_text(KUBE_RECONCILE_LOG_LEVEL_WARN, &line);
    return done(action);
  }

  int64_t expires_ms = (created_seconds + (int64_t)ttl_seconds) * 1000;
  int64_t now_ms = now_milliseconds();
  if (now_ms < expires_ms) {
    int64_t remaining_ms = expires_ms - now_ms;
    uint32_t delay_ms = remaining_ms > UINT32_MAX ? UINT32_MAX : (uint32_t)remaining_ms;
    text line = text_in(buffer, sizeof buffer);
    add_config_map(&line, target);
    text_add(&line, " expires in ");
    text_add_i64(&line, remaining_ms);
    text_add(&line, " ms; looking again in ");
    text_add_u64(&line, delay_ms);
    text_add(&line, " ms");
    log_text(KUBE_RECONCILE_LOG_LEVEL_DEBUG, &line);
    return requeue_after(action, delay_ms);
  }
  return delete_expired(target, ttl_seconds, action, error);
}

bool exports_reconciler_reconcile(reconciler_request_t *request, reconciler_action_t *action,
                                  reconciler_reconcile_error_t *error) {
  bool succeeded = reconcile(request, action, error);
  reconciler_request_free(request);  // the request's strings belong to the guest
  return succeeded;
}
