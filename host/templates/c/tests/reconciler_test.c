// Unit tests of the reconciler against the SDK's fake host (sdk/fake_host.h): built natively
// under AddressSanitizer, LeakSanitizer and UndefinedBehaviorSanitizer by test.sh.
#include <stdio.h>
#include <string.h>

#include "fake_host.h"

static int failures;

#define CHECK(condition)                                                               \
  do {                                                                                 \
    if (!(condition)) {                                                                \
      fprintf(stderr, "%s:%d: check failed: %s\n", __FILE__, __LINE__, #condition);    \
      failures++;                                                                      \
    }                                                                                  \
  } while (0)

#define UNMARKED                                                                 \
  "{\"apiVersion\":\"v1\",\"kind\":\"ConfigMap\",\"metadata\":{\"name\":\"settings\"," \
  "\"namespace\":\"default\",\"labels\":{\"{{name}}\":\"true\"}},\"data\":{\"a\":\"1\"}}"
#define MARKED                                                                          \
  "{\"apiVersion\":\"v1\",\"kind\":\"ConfigMap\",\"metadata\":{\"name\":\"settings\","   \
  "\"namespace\":\"default\",\"annotations\":{\"{{name}}.reconcile-host.dev/reconciled\":" \
  "\"true\"}}}"

static fake_host_outcome reconcile(const char *object) {
  return fake_host_reconcile("v1", "ConfigMap", "default", "settings", object, 0);
}

static void an_unmarked_config_map_is_marked_with_an_event(void) {
  fake_host_reset();
  fake_host_add("v1", "ConfigMap", "default", "settings", UNMARKED);
  fake_host_outcome outcome = reconcile(UNMARKED);
  CHECK(!outcome.is_err && outcome.action == 0);
  const fake_host_call *patch = fake_host_find("patch");
  CHECK(patch != NULL && strcmp(patch->name, "settings") == 0 && patch->level == 0);
  CHECK(patch != NULL && strstr(patch->body, "\"{{name}}.reconcile-host.dev/reconciled\":\"true\""));
  const fake_host_call *event = fake_host_find("event");
  CHECK(event != NULL && event->level == 0 && strncmp(event->body, "Reconciled: ", 12) == 0);
}

static void a_marked_config_map_is_left_alone(void) {
  fake_host_reset();
  fake_host_outcome outcome = reconcile(MARKED);
  CHECK(!outcome.is_err && outcome.action == 0);
  CHECK(fake_host_call_count() == 0);
}

static void a_deleted_object_needs_nothing(void) {
  fake_host_reset();
  fake_host_outcome outcome = reconcile(NULL);
  CHECK(!outcome.is_err && outcome.action == 0);
  CHECK(fake_host_call_count() == 0);
}

static void a_refused_patch_fails_the_reconcile(void) {
  fake_host_reset();
  fake_host_add("v1", "ConfigMap", "default", "settings", UNMARKED);
  fake_host_deny("patch");
  fake_host_outcome outcome = reconcile(UNMARKED);
  CHECK(outcome.is_err && strstr(outcome.error, "cannot mark ConfigMap settings: denied: "));
  CHECK(fake_host_find("event") == NULL);
}

int main(void) {
  an_unmarked_config_map_is_marked_with_an_event();
  a_marked_config_map_is_left_alone();
  a_deleted_object_needs_nothing();
  a_refused_patch_fails_the_reconcile();
  fake_host_reset();
  if (failures > 0) {
    fprintf(stderr, "%d checks failed\n", failures);
    return 1;
  }
  printf("reconciler: 4 tests passed\n");
  return 0;
}
