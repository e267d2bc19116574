// The fake host of fake_host.h: the raw imports of the generated bindings, at the canonical
// ABI. The bindings lay values out with `sizeof(void *)` strides, so they run natively unchanged.
#include "fake_host.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "json.h"

#define SLOT sizeof(void *)

// The raw export and its post-return function, defined in the generated reconciler.c.
uint8_t *__wasm_export_exports_reconciler_reconcile(uint8_t *, size_t, uint8_t *, size_t, int32_t,
                                                    uint8_t *, size_t, uint8_t *, size_t, int32_t,
                                                    uint8_t *, size_t, int32_t);
void __wasm_export_exports_reconciler_reconcile_post_return(uint8_t *);

// Defined by reconciler_component_type.o in the component; natively, only the reference the
// bindings make to keep that object linked needs an answer.
void __component_type_object_force_link_reconciler(void) {}

typedef struct stored {
  char api_version[128], kind[128], namespace_[128], name[256];
  char *json;  // NULL: a free slot
} stored;

static stored objects[FAKE_HOST_MAX_OBJECTS];
static fake_host_call calls[FAKE_HOST_MAX_CALLS];
static size_t call_count;
static char denied[16][16];
static size_t denied_count;

// `bytes[0..len)` as a NUL-terminated text in `out[0..cap)`, cut when longer.
static void copy_in(char *out, size_t cap, const uint8_t *bytes, size_t len) {
  if (len >= cap) len = cap - 1;
  if (len > 0) memcpy(out, bytes, len);
  out[len] = '\0';
}

static void copy_text(char *out, size_t cap, const char *text) {
  copy_in(out, cap, (const uint8_t *)(text ? text : ""), text ? strlen(text) : 0);
}

static char *owned(const char *text) {
  size_t len = strlen(text) + 1;
  char *copy = malloc(len);
  if (copy == NULL) abort();
  memcpy(copy, text, len);
  return copy;
}

void fake_host_reset(void) {
  for (size_t i = 0; i < FAKE_HOST_MAX_OBJECTS; i++) {
    free(objects[i].json);
    objects[i].json = NULL;
  }
  call_count = 0;
  denied_count = 0;
}

static stored *find(const char *api_version, const char *kind, const char *namespace_,
                    const char *name) {
  for (size_t i = 0; i < FAKE_HOST_MAX_OBJECTS; i++) {
    stored *o = &objects[i];
    if (o->json && strcmp(o->api_version, api_version) == 0 && strcmp(o->kind, kind) == 0 &&
        strcmp(o->namespace_, namespace_ ? namespace_ : "") == 0 && strcmp(o->name, name) == 0) {
      return o;
    }
  }
  return NULL;
}

bool fake_host_add(const char *api_version, const char *kind, const char *namespace_,
                   const char *name, const char *json) {
  stored *o = find(api_version, kind, namespace_, name);
  for (size_t i = 0; o == NULL && i < FAKE_HOST_MAX_OBJECTS; i++) {
    if (objects[i].json == NULL) o = &objects[i];
  }
  if (o == NULL) return false;
  copy_text(o->api_version, sizeof o->api_version, api_version);
  copy_text(o->kind, sizeof o->kind, kind);
  copy_text(o->namespace_, sizeof o->namespace_, namespace_);
  copy_text(o->name, sizeof o->name, name);
  char *previous = o->json;
  o->json = owned(json);
  free(previous);
  return true;
}

const char *fake_host_object(const char *api_version, const char *kind, const char *namespace_,
                             const char *name) {
  stored *o = find(api_version, kind, namespace_, name);
  return o ? o->json : NULL;
}

void fake_host_deny(const char *verb) {
  if (denied_count < sizeof denied / sizeof denied[0]) {
    copy_text(denied[denied_count++], sizeof denied[0], verb);
  }
}

size_t fake_host_call_count(void) { return call_count; }

const fake_host_call *fake_host_call_at(size_t index) {
  return index < call_count ? &calls[index] : NULL;
}

const fake_host_call *fake_host_find(const char *verb) {
  for (size_t i = 0; i < call_count; i++) {
    if (strcmp(calls[i].verb, verb) == 0) return &calls[i];
  }
  return NULL;
}

// A new record of a call of `verb` (the last one is reused when the record is full).
static fake_host_call *record(const char *verb) {
  fake_host_call *call = &calls[call_count < FAKE_HOST_MAX_CALLS ? call_count++ : call_count - 1];
  memset(call, 0, sizeof *call);
  copy_text(call->verb, sizeof call->verb, verb);
  return call;
}

// Records a call about apiVersion/kind namespace/name (the raw arguments of an object-ref).
static fake_host_call *record_ref(const char *verb, uint8_t *av, size_t avl, uint8_t *k,
                                  size_t kl, int32_t has_ns, uint8_t *ns, size_t nsl,
                                  uint8_t *name, size_t namel) {
  fake_host_call *call = record(verb);
  copy_in(call->api_version, sizeof call->api_version, av, avl);
  copy_in(call->kind, sizeof call->kind, k, kl);
  if (has_ns) copy_in(call->namespace_, sizeof call->namespace_, ns, nsl);
  copy_in(call->name, sizeof call->name, name, namel);
  return call;
}

// Writes a guest-owned copy of `text` (as cabi_realloc would make it) into slots `slot`, +1.
static void put_string(uint8_t *area, size_t slot, const char *text) {
  size_t len = strlen(text);
  uint8_t *ptr = (uint8_t *)1;  // what cabi_realloc answers for size 0
  if (len > 0) {
    ptr = malloc(len);
    if (ptr == NULL) abort();
    memcpy(ptr, text, len);
  }
  memcpy(area + slot * SLOT, &ptr, sizeof ptr);
  memcpy(area + (slot + 1) * SLOT, &len, sizeof len);
}

static void put_ok(uint8_t *area) { area[0] = 0; }

static void put_api_error(uint8_t *area, uint16_t code, const char *reason, const char *message) {
  area[0] = 1;
  area[SLOT] = 2;
  memcpy(area + 2 * SLOT, &code, sizeof code);
  put_string(area, 3, reason);
  put_string(area, 5, message);
}

static void put_error(uint8_t *area, uint8_t tag, const char *message) {
  area[0] = 1;
  area[SLOT] = tag;  // 0 denied, 1 invalid, 3 unavailable
  put_string(area, 2, message);
}

// True (and the denial written into `area`) when `call`'s verb is denied.
static bool refused(const fake_host_call *call, uint8_t *area) {
  for (size_t i = 0; i < denied_count; i++) {
    if (strcmp(denied[i], call->verb) == 0) {
      char message[512];
      snprintf(message, sizeof message, "the plugin has no grant to `%s` %s %s (fake host)",
               call->verb, call->api_version, call->kind);
      put_error(area, 0, message);
      return true;
    }
  }
  return false;
}

// The object's identity from its JSON into `call`; false when the body lacks one.
static bool identify(fake_host_call *call) {
  json_span root, value;
  if (!json_parse(call->body, strlen(call->body), &root)) return false;
  const char *const namespace_path[] = {"metadata", "namespace"};
  const char *const name_path[] = {"metadata", "name"};
  if (json_path(root, namespace_path, 2, &value)) {
    json_string_copy(value, call->namespace_, sizeof call->namespace_);
  }
  return json_object_get(root, "apiVersion", &value) &&
         json_string_copy(value, call->api_version, sizeof call->api_version) &&
         json_object_get(root, "kind", &value) &&
         json_string_copy(value, call->kind, sizeof call->kind) &&
         json_path(root, name_path, 2, &value) &&
         json_string_copy(value, call->name, sizeof call->name);
}

static stored *target_of(const fake_host_call *call) {
  return find(call->api_version, call->kind, call->namespace_, call->name);
}

// Whether the object's labels satisfy `selector` (`k=v` terms joined by commas).
static bool selected(const char *json, const char *selector) {
  json_span root, labels, value;
  const char *const path[] = {"metadata", "labels"};
  if (!json_parse(json, strlen(json), &root)) return false;
  bool has_labels = json_path(root, path, 2, &labels);
  char term[512];
  for (const char *start = selector; *start != '\0';) {
    size_t len = strcspn(start, ",");
    copy_in(term, sizeof term, (const uint8_t *)start, len);
    char *equals = strchr(term, '=');
    if (equals == NULL) return false;
    *equals = '\0';
    if (!has_labels || !json_object_get(labels, term, &value) ||
        !json_string_equals(value, equals + 1)) {
      return false;
    }
    start += len + (start[len] == ',');
  }
  return true;
}

static void answer_option(uint8_t *area, const stored *o) {
  put_ok(area);
  area[SLOT] = o != NULL;
  if (o != NULL) put_string(area, 2, o->json);
}

void __wasm_import_kube_reconcile_cache_get(uint8_t *av, size_t avl, uint8_t *k, size_t kl,
                                            int32_t has_ns, uint8_t *ns, size_t nsl,
                                            uint8_t *name, size_t namel, uint8_t *area) {
  fake_host_call *call = record_ref("cache.get", av, avl, k, kl, has_ns, ns, nsl, name, namel);
  if (!refused(call, area)) answer_option(area, target_of(call));
}

void __wasm_import_kube_reconcile_cache_list(uint8_t *av, size_t avl, uint8_t *k, size_t kl,
                                             int32_t has_ns, uint8_t *ns, size_t nsl,
                                             int32_t has_selector, uint8_t *selector,
                                             size_t selector_len, uint8_t *area) {
  fake_host_call *call = record_ref("cache.list", av, avl, k, kl, has_ns, ns, nsl, NULL, 0);
  if (has_selector) copy_in(call->body, sizeof call->body, selector, selector_len);
  if (refused(call, area)) return;
  size_t count = 0;
  uint8_t *list = malloc(FAKE_HOST_MAX_OBJECTS * 2 * SLOT);
  if (list == NULL) abort();
  for (size_t i = 0; i < FAKE_HOST_MAX_OBJECTS; i++) {
    const stored *o = &objects[i];
    if (o->json && strcmp(o->api_version, call->api_version) == 0 &&
        strcmp(o->kind, call->kind) == 0 &&
        (!has_ns || strcmp(o->namespace_, call->namespace_) == 0) &&
        (!has_selector || selected(o->json, call->body))) {
      put_string(list, 2 * count++, o->json);
    }
  }
  put_ok(area);
  memcpy(area + SLOT, &list, sizeof list);
  memcpy(area + 2 * SLOT, &count, sizeof count);
}

// Stores the object in `call->body` and answers it; `must_exist`/`must_not_exist` as for
// replace and create.
static void write_object(fake_host_call *call, uint8_t *area, bool must_exist,
                         bool must_not_exist) {
  if (!identify(call)) {
    put_error(area, 1, "the object needs apiVersion, kind and metadata.name (fake host)");
    return;
  }
  if (refused(call, area)) return;
  bool exists = target_of(call) != NULL;
  if (must_exist && !exists) {
    put_api_error(area, 404, "NotFound", "the object does not exist (fake host)");
  } else if (must_not_exist && exists) {
    put_api_error(area, 409, "AlreadyExists", "the object already exists (fake host)");
  } else if (!fake_host_add(call->api_version, call->kind, call->namespace_, call->name,
                            call->body)) {
    put_error(area, 3, "the fake host's store is full");
  } else {
    put_ok(area);
    put_string(area, 1, call->body);
  }
}

void __wasm_import_kube_reconcile_client_apply(uint8_t *object, size_t len, int32_t force,
                                               int32_t has_sub, uint8_t *sub, size_t sub_len,
                                               uint8_t *area) {
  fake_host_call *call = record("apply");
  copy_in(call->body, sizeof call->body, object, len);
  if (has_sub) copy_in(call->subresource, sizeof call->subresource, sub, sub_len);
  call->level = force;
  write_object(call, area, false, false);
}

void __wasm_import_kube_reconcile_client_patch(uint8_t *av, size_t avl, uint8_t *k, size_t kl,
                                               int32_t has_ns, uint8_t *ns, size_t nsl,
                                               uint8_t *name, size_t namel, int32_t type,
                                               uint8_t *body, size_t body_len, int32_t has_sub,
                                               uint8_t *sub, size_t sub_len, uint8_t *area) {
  fake_host_call *call = record_ref("patch", av, avl, k, kl, has_ns, ns, nsl, name, namel);
  copy_in(call->body, sizeof call->body, body, body_len);
  if (has_sub) copy_in(call->subresource, sizeof call->subresource, sub, sub_len);
  call->level = type;  // 0 merge, 1 JSON patch, 2 strategic
  if (refused(call, area)) return;
  const stored *o = target_of(call);
  if (o == NULL) {
    put_api_error(area, 404, "NotFound", "the object does not exist (fake host)");
    return;
  }
  put_ok(area);
  put_string(area, 1, o->json);
}

void __wasm_import_kube_reconcile_client_create(uint8_t *object, size_t len, uint8_t *area) {
  fake_host_call *call = record("create");
  copy_in(call->body, sizeof call->body, object, len);
  write_object(call, area, false, true);
}

void __wasm_import_kube_reconcile_client_replace(uint8_t *object, size_t len, uint8_t *area) {
  fake_host_call *call = record("replace");
  copy_in(call->body, sizeof call->body, object, len);
  write_object(call, area, true, false);
}

void __wasm_import_kube_reconcile_client_delete(uint8_t *av, size_t avl, uint8_t *k, size_t kl,
                                                int32_t has_ns, uint8_t *ns, size_t nsl,
                                                uint8_t *name, size_t namel, uint8_t *area) {
  fake_host_call *call = record_ref("delete", av, avl, k, kl, has_ns, ns, nsl, name, namel);
  if (refused(call, area)) return;
  stored *o = target_of(call);
  if (o == NULL) {
    put_api_error(area, 404, "NotFound", "the object does not exist (fake host)");
    return;
  }
  free(o->json);
  o->json = NULL;
  put_ok(area);
}

void __wasm_import_kube_reconcile_client_get(uint8_t *av, size_t avl, uint8_t *k, size_t kl,
                                             int32_t has_ns, uint8_t *ns, size_t nsl,
                                             uint8_t *name, size_t namel, uint8_t *area) {
  fake_host_call *call = record_ref("get", av, avl, k, kl, has_ns, ns, nsl, name, namel);
  if (!refused(call, area)) answer_option(area, target_of(call));
}

void __wasm_import_kube_reconcile_events_record_event(uint8_t *av, size_t avl, uint8_t *k,
                                                      size_t kl, int32_t has_ns, uint8_t *ns,
                                                      size_t nsl, uint8_t *name, size_t namel,
                                                      int32_t type, uint8_t *reason,
                                                      size_t reason_len, uint8_t *note,
                                                      size_t note_len, uint8_t *area) {
  fake_host_call *call = record_ref("event", av, avl, k, kl, has_ns, ns, nsl, name, namel);
  call->level = type;
  char text[FAKE_HOST_TEXT];
  copy_in(call->body, sizeof call->body, reason, reason_len);
  copy_in(text, sizeof text, note, note_len);
  strncat(call->body, ": ", sizeof call->body - strlen(call->body) - 1);
  strncat(call->body, text, sizeof call->body - strlen(call->body) - 1);
  if (!refused(call, area)) put_ok(area);
}

void __wasm_import_kube_reconcile_log_log(int32_t level, uint8_t *message, size_t len) {
  fake_host_call *call = record("log");
  call->level = level;
  copy_in(call->body, sizeof call->body, message, len);
}

// A guest-owned copy of `text` for an argument of the export (the guest frees the request).
static uint8_t *argument(const char *text, size_t *len) {
  *len = strlen(text);
  if (*len == 0) return (uint8_t *)1;
  uint8_t *copy = malloc(*len);
  if (copy == NULL) abort();
  memcpy(copy, text, *len);
  return copy;
}

fake_host_outcome fake_host_reconcile(const char *api_version, const char *kind,
                                      const char *namespace_, const char *name,
                                      const char *object, uint32_t requeues) {
  size_t avl, kl, nsl = 0, namel, objl = 0;
  uint8_t *av = argument(api_version, &avl);
  uint8_t *k = argument(kind, &kl);
  bool has_ns = namespace_ != NULL && namespace_[0] != '\0';
  uint8_t *ns = has_ns ? argument(namespace_, &nsl) : NULL;
  uint8_t *n = argument(name, &namel);
  uint8_t *obj = object ? argument(object, &objl) : NULL;
  uint8_t *answer = __wasm_export_exports_reconciler_reconcile(
      av, avl, k, kl, has_ns, ns, nsl, n, namel, object != NULL, obj, objl, (int32_t)requeues);
  fake_host_outcome outcome = {0};
  outcome.is_err = answer[0] != 0;
  if (outcome.is_err) {
    uint8_t *message;
    size_t len;
    memcpy(&message, answer + SLOT, sizeof message);
    memcpy(&len, answer + 2 * SLOT, sizeof len);
    copy_in(outcome.error, sizeof outcome.error, message, len);
  } else {
    outcome.action = answer[SLOT];
    if (outcome.action == 2) memcpy(&outcome.after_ms, answer + 4 + SLOT, sizeof(uint32_t));
  }
  __wasm_export_exports_reconciler_reconcile_post_return(answer);
  return outcome;
}
