// Native tests of the whole reconciler at the canonical-ABI boundary, run under AddressSanitizer
// and LeakSanitizer by test.sh. This file plays the host: it implements the raw imports the
// generated bindings call (`__wasm_import_*`), hands every string to the guest in memory from
// `malloc` as the host would through `cabi_realloc`, calls the raw export and its post-return
// function, and checks the answer. Whatever the guest owns and does not free is reported as a
// leak when the program exits; a double free or an out-of-bounds read aborts it.
//
// The bindings lay values out with `sizeof(void *)` strides, so they run natively unchanged.
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "reconciler.h"

// The raw export and its post-return function, defined in the generated reconciler.c.
uint8_t *__wasm_export_exports_reconciler_reconcile(uint8_t *, size_t, uint8_t *, size_t, int32_t,
                                                    uint8_t *, size_t, uint8_t *, size_t, int32_t,
                                                    uint8_t *, size_t, int32_t);
void __wasm_export_exports_reconciler_reconcile_post_return(uint8_t *);

// What the mock host answers, per scenario.
typedef enum outcome { OK, DENIED, NOT_FOUND, CONFLICT, UNAVAILABLE } outcome;

static struct {
  const char *namespace_json;  // cache.get of the Namespace: NULL for none
  outcome cache;
  outcome delete_;
  outcome event;
  int deletes, events, logs;
  char last_log[1024];
  char last_note[1024];
} host;

static int failures;

#define CHECK(condition)                                                                   \
  do {                                                                                     \
    if (!(condition)) {                                                                    \
      fprintf(stderr, "%s:%d: check failed: %s\n", __FILE__, __LINE__, #condition);        \
      failures++;                                                                          \
    }                                                                                      \
  } while (0)

// A guest-owned copy of `text` (without NUL), as the host's cabi_realloc call would make it.
static uint8_t *guest_copy(const char *text, size_t *len) {
  *len = strlen(text);
  if (*len == 0) return (uint8_t *)1;  // what cabi_realloc answers for size 0
  uint8_t *copy = malloc(*len);
  if (copy == NULL) abort();
  memcpy(copy, text, *len);
  return copy;
}

static void put_string(uint8_t *area, size_t slot, const char *text) {
  size_t len;
  uint8_t *ptr = guest_copy(text, &len);
  memcpy(area + slot * sizeof(void *), &ptr, sizeof ptr);
  memcpy(area + (slot + 1) * sizeof(void *), &len, sizeof len);
}

// Writes `result<_, call-error>` (or the error part of another result) into a return area.
static void put_result(uint8_t *area, outcome result) {
  area[0] = result != OK;
  switch (result) {
    case OK:
      return;
    case DENIED:
      area[sizeof(void *)] = 0;
      put_string(area, 2, "plugin `ttl-reaper-c` has no grant to `delete` v1 ConfigMap");
      return;
    case NOT_FOUND:
    case CONFLICT: {
      area[sizeof(void *)] = 2;
      uint16_t code = result == NOT_FOUND ? 404 : 409;
      memcpy(area + 2 * sizeof(void *), &code, sizeof code);
      put_string(area, 3, result == NOT_FOUND ? "NotFound" : "Conflict");
      put_string(area, 5, "the object changed");
      return;
    }
    case UNAVAILABLE:
      area[sizeof(void *)] = 3;
      put_string(area, 2, "connection refused");
      return;
  }
}

static void copy_text(char *out, size_t cap, const uint8_t *ptr, size_t len) {
  if (len >= cap) len = cap - 1;
  memcpy(out, ptr, len);
  out[len] = '\0';
}

void __wasm_import_kube_reconcile_cache_get(uint8_t *api_version, size_t api_version_len,
                                            uint8_t *kind, size_t kind_len, int32_t has_namespace,
                                            uint8_t *namespace_, size_t namespace_len,
                                            uint8_t *name, size_t name_len, uint8_t *area) {
  (void)api_version, (void)api_version_len, (void)namespace_, (void)namespace_len;
  (void)name, (void)name_len;
  CHECK(kind_len == 9 && memcmp(kind, "Namespace", 9) == 0 && has_namespace == 0);
  put_result(area, host.cache);
  if (host.cache == OK) {
    area[sizeof(void *)] = host.namespace_json != NULL;
    if (host.namespace_json != NULL) put_string(area, 2, host.namespace_json);
  }
}

void __wasm_import_kube_reconcile_client_delete(uint8_t *api_version, size_t api_version_len,
                                                uint8_t *kind, size_t kind_len, int32_t has_ns,
                                                uint8_t *ns, size_t ns_len, uint8_t *name,
                                                size_t name_len, uint8_t *area) {
  (void)api_version, (void)api_version_len, (void)kind, (void)kind_len, (void)has_ns;
  (void)ns, (void)ns_len, (void)name, (void)name_len;
  host.deletes++;
  put_result(area, host.delete_);
}

void __wasm_import_kube_reconcile_events_record_event(
    uint8_t *api_version, size_t api_version_len, uint8_t *kind, size_t kind_len, int32_t has_ns,
    uint8_t *ns, size_t ns_len, uint8_t *name, size_t name_len, int32_t event_type,
    uint8_t *reason, size_t reason_len, uint8_t *note, size_t note_len, uint8_t *area) {
  (void)api_version, (void)api_version_len, (void)kind, (void)kind_len, (void)has_ns;
  (void)ns, (void)ns_len, (void)name, (void)name_len;
  CHECK(event_type == KUBE_RECONCILE_EVENTS_EVENT_TYPE_WARNING);
  CHECK(reason_len == 10 && memcmp(reason, "InvalidTTL", 10) == 0);
  host.events++;
  copy_text(host.last_note, sizeof host.last_note, note, note_len);
  put_result(area, host.event);
}

void __wasm_import_kube_reconcile_log_log(int32_t level, uint8_t *message, size_t len) {
  (void)level;
  host.logs++;
  copy_text(host.last_log, sizeof host.last_log, message, len);
}

// Imports this guest never calls; the bindings reference them all.
#define UNUSED_IMPORT(name) \
  void name(void) { abort(); }
UNUSED_IMPORT(__wasm_import_kube_reconcile_cache_list)
UNUSED_IMPORT(__wasm_import_kube_reconcile_client_apply)
UNUSED_IMPORT(__wasm_import_kube_reconcile_client_patch)
UNUSED_IMPORT(__wasm_import_kube_reconcile_client_create)
UNUSED_IMPORT(__wasm_import_kube_reconcile_client_replace)
UNUSED_IMPORT(__wasm_import_kube_reconcile_client_get)
void __component_type_object_force_link_reconciler(void) {}

// The guest's answer to one reconcile.
typedef struct answer {
  bool is_err;
  uint8_t action;
  uint32_t after_ms;
  char message[1024];
} answer;

// Reconciles ConfigMap ttl-demo/<name> holding `object` (NULL: deleted) as the host would.
static answer reconcile(const char *object) {
  size_t api_version_len, kind_len, namespace_len, name_len, object_len = 0;
  uint8_t *api_version = guest_copy("v1", &api_version_len);
  uint8_t *kind = guest_copy("ConfigMap", &kind_len);
  uint8_t *namespace_ = guest_copy("ttl-demo", &namespace_len);
  uint8_t *name = guest_copy("fixture", &name_len);
  uint8_t *object_ptr = object != NULL ? guest_copy(object, &object_len) : NULL;
  uint8_t *area = __wasm_export_exports_reconciler_reconcile(
      api_version, api_version_len, kind, kind_len, 1, namespace_, namespace_len, name, name_len,
      object != NULL, object_ptr, object_len, 0);
  answer result = {.is_err = area[0] != 0};
  if (result.is_err) {
    uint8_t *message;
    size_t len;
    memcpy(&message, area + sizeof(void *), sizeof message);
    memcpy(&len, area + 2 * sizeof(void *), sizeof len);
    copy_text(result.message, sizeof result.message, message, len);
  } else {
    result.action = area[sizeof(void *)];
    memcpy(&result.after_ms, area + 4 + sizeof(void *), sizeof result.after_ms);
  }
  __wasm_export_exports_reconciler_reconcile_post_return(area);
  return result;
}

// A ConfigMap created `age` seconds ago with ttl.example.com/after `after`.
static const char *config_map(long age, const char *after) {
  static char json[1024];
  char created[32];
  time_t then = time(NULL) - age;
  strftime(created, sizeof created, "%Y-%m-%dT%H:%M:%SZ", gmtime(&then));
  snprintf(json, sizeof json,
           "{\"apiVersion\":\"v1\",\"kind\":\"ConfigMap\",\"metadata\":{\"name\":\"fixture\","
           "\"namespace\":\"ttl-demo\",\"creationTimestamp\":\"%s\",\"labels\":"
           "{\"ttl.example.com/enabled\":\"true\"},\"annotations\":{\"ttl.example.com/after\":"
           "\"%s\"}}}",
           created, after);
  return json;
}

static void reset(void) {
  memset(&host, 0, sizeof host);
  host.namespace_json = "{\"metadata\":{\"name\":\"ttl-demo\"}}";
}

int main(void) {
  reset();
  answer a = reconcile(config_map(0, "3600"));
  CHECK(!a.is_err && a.action == 2 && a.after_ms > 3598000 && a.after_ms <= 3600000);
  CHECK(host.deletes == 0);

  reset();
  a = reconcile(config_map(0, "3155760000"));
  CHECK(!a.is_err && a.action == 2 && a.after_ms == UINT32_MAX);

  reset();
  a = reconcile(config_map(10, "5"));
  CHECK(!a.is_err && a.action == 0 && host.deletes == 1);
  CHECK(strstr(host.last_log, "deleted ConfigMap ttl-demo/fixture") != NULL);

  reset();  // the namespace is not in the cache: not paused
  host.namespace_json = NULL;
  a = reconcile(config_map(10, "5"));
  CHECK(!a.is_err && a.action == 0 && host.deletes == 1);

  reset();
  host.namespace_json =
      "{\"metadata\":{\"name\":\"ttl-demo\",\"labels\":{\"ttl.example.com/paused\":\"true\"}}}";
  a = reconcile(config_map(10, "5"));
  CHECK(!a.is_err && a.action == 0 && host.deletes == 0);
  CHECK(strstr(host.last_log, "its namespace is labelled ttl.example.com/paused=true") != NULL);

  reset();
  host.cache = UNAVAILABLE;
  a = reconcile(config_map(10, "5"));
  CHECK(a.is_err && strstr(a.message, "reading Namespace ttl-demo from the cache failed: the "
                                      "API server is unavailable: connection refused") != NULL);

  reset();
  host.delete_ = DENIED;
  a = reconcile(config_map(10, "5"));
  CHECK(a.is_err);
  CHECK(strcmp(a.message, "deleting expired ConfigMap ttl-demo/fixture failed: denied: plugin "
                          "`ttl-reaper-c` has no grant to `delete` v1 ConfigMap") == 0);

  reset();
  host.delete_ = CONFLICT;
  a = reconcile(config_map(10, "5"));
  CHECK(a.is_err && strstr(a.message, "the API server answered 409 Conflict: the object "
                                      "changed") != NULL);

  reset();  // already gone: fine
  host.delete_ = NOT_FOUND;
  a = reconcile(config_map(10, "5"));
  CHECK(!a.is_err && a.action == 0);

  reset();
  a = reconcile(config_map(0, "soon"));
  CHECK(!a.is_err && a.action == 0 && host.events == 1 && host.deletes == 0);
  CHECK(strstr(host.last_note, "ttl.example.com/after is \"soon\"") != NULL);

  reset();
  host.event = UNAVAILABLE;
  a = reconcile(config_map(0, "-1"));
  CHECK(a.is_err && strstr(a.message, "recording the InvalidTTL event") != NULL);

  reset();
  a = reconcile("{\"metadata\":{}}");  // no annotation
  CHECK(!a.is_err && host.events == 1 && strstr(host.last_note, "is missing") != NULL);

  reset();
  a = reconcile("{\"metadata\":{\"annotations\":{\"ttl.example.com/after\":\"5\"}}}");
  CHECK(!a.is_err && a.action == 0 && host.deletes == 0);  // no creationTimestamp: left alone

  reset();
  a = reconcile("{\"metadata\":");  // truncated
  CHECK(a.is_err && strstr(a.message, "not a JSON object") != NULL);

  reset();
  a = reconcile(NULL);  // deleted
  CHECK(!a.is_err && a.action == 0 && host.deletes == 0 && host.logs == 0);

  if (failures > 0) {
    fprintf(stderr, "%d checks failed\n", failures);
    return 1;
  }
  printf("reaper: all checks passed\n");
  return 0;
}
