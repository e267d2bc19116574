// A reconcile host in memory, for native unit tests of a C reconciler: it implements the raw
// imports the generated bindings call (`reconcile-host bindings --lang c`), hands every answer
// to the guest in memory from malloc as the host does through cabi_realloc, calls the raw
// `reconcile` export and its post-return function, and records every call. Build the tests
// natively (not for wasm) with the bindings' reconciler.c and this file; under AddressSanitizer
// whatever the guest owns and does not free is reported as a leak.
//
// It answers as the API server does where it is cheap to: reads come from the objects added
// with fake_host_add (cache and API alike); get of a missing object is `none`, delete and patch
// of one is 404 NotFound, create of a present one is 409 AlreadyExists; create, replace and
// apply store their body; delete removes the object. A patch is recorded and answered with the
// stored object, not applied (the test asserts on the body sent). Label selectors in
// cache.list are `key=value` terms joined by commas. Verbs given to fake_host_deny fail as a
// missing grant does (`call-error::denied`).
#ifndef RECONCILE_GUEST_FAKE_HOST_H
#define RECONCILE_GUEST_FAKE_HOST_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define FAKE_HOST_MAX_OBJECTS 64
#define FAKE_HOST_MAX_CALLS 64
// Texts kept of a call (bodies, notes, log lines, the reconcile error) are cut to this size.
#define FAKE_HOST_TEXT 2048

// One call the reconciler made.
typedef struct fake_host_call {
  // "cache.get", "cache.list", "apply", "patch", "create", "replace", "delete", "get",
  // "event" or "log".
  char verb[16];
  char api_version[128];
  char kind[128];
  char namespace_[128];  // "" for none
  char name[256];        // "" for calls without a target (apply, create, replace, log)
  char subresource[32];  // "" for none
  // The object or patch sent, an event's "Reason: note", or the log line.
  char body[FAKE_HOST_TEXT];
  // The event type (0 normal, 1 warning) or the log level (0 trace ... 4 error).
  int level;
} fake_host_call;

// The answer of a reconcile.
typedef struct fake_host_outcome {
  bool is_err;
  int action;         // 0 done, 1 requeue, 2 requeue-after (when !is_err)
  uint32_t after_ms;  // for requeue-after
  char error[FAKE_HOST_TEXT];
} fake_host_outcome;

// Forgets every object, call and denial.
void fake_host_reset(void);

// Stores `json` as the object apiVersion/kind namespace/name (namespace NULL or "" for
// cluster-scoped kinds), replacing one stored there. False when the store is full.
bool fake_host_add(const char *api_version, const char *kind, const char *namespace_,
                   const char *name, const char *json);

// The stored object's JSON, or NULL.
const char *fake_host_object(const char *api_version, const char *kind, const char *namespace_,
                             const char *name);

// Every later call of `verb` fails `denied`, as a missing grant would.
void fake_host_deny(const char *verb);

size_t fake_host_call_count(void);
const fake_host_call *fake_host_call_at(size_t index);
// The first call of `verb`, or NULL.
const fake_host_call *fake_host_find(const char *verb);

// Calls the reconcile export as the host does, for the object apiVersion/kind namespace/name
// whose cached JSON is `object` (NULL: absent, as after a delete).
fake_host_outcome fake_host_reconcile(const char *api_version, const char *kind,
                                      const char *namespace_, const char *name,
                                      const char *object, uint32_t requeues);

#endif
