"""Unit tests of the replicator against a fake host (no component, no API server)."""

from __future__ import annotations

import copy
import json
import os
import unittest
from unittest import mock

from componentize_py_types import Err
from wit_world.imports import types as wit

import replicator
from fake_host import FakeHost
from replicator import COPY_OF, FINALIZER, NAMESPACES


def source(namespaces: str, **metadata: object) -> dict:
    return {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {
            "name": "settings",
            "namespace": "default",
            "resourceVersion": "7",
            "labels": {"replicator.example.com/replicate": "python"},
            "annotations": {NAMESPACES: namespaces},
            "finalizers": [FINALIZER],
            **metadata,
        },
        "data": {"a": "1"},
    }


def copy_in(namespace: str) -> dict:
    return replicator.copy(source(""), namespace)


def reconcile(obj: dict | None) -> wit.Action:
    """Calls the exported `reconcile` as the host does; raises `Err` for a reconcile-error."""
    target = wit.ObjectRef(wit.Kind("v1", "ConfigMap"), "default", "settings")
    request = wit.Request(target, None if obj is None else json.dumps(obj), 0)
    return replicator.WitWorld().reconcile(request)


class PureFunctions(unittest.TestCase):
    def test_target_namespaces_are_trimmed_deduplicated_and_exclude_the_source_namespace(self):
        self.assertEqual(
            replicator.target_namespaces(source(" team-a, team-b,,default ,team-a ")),
            ["team-a", "team-b"],
        )
        self.assertEqual(replicator.target_namespaces({"metadata": {}}), [])

    def test_copy_keeps_name_and_data_and_is_labelled_with_its_source_only(self):
        copied = replicator.copy(source("team-a"), "team-a")
        self.assertEqual(
            copied,
            {
                "apiVersion": "v1",
                "kind": "ConfigMap",
                "metadata": {
                    "name": "settings",
                    "namespace": "team-a",
                    "labels": {COPY_OF: "default.settings"},
                },
                "data": {"a": "1"},
            },
        )

    def test_copy_carries_binary_data_and_omits_what_the_source_lacks(self):
        with_binary = {**source("team-a"), "binaryData": {"b": "AAE="}}
        del with_binary["data"]
        copied = replicator.copy(with_binary, "team-a")
        self.assertEqual(copied["binaryData"], {"b": "AAE="})
        self.assertNotIn("data", copied)


class Reconcile(unittest.TestCase):
    def test_a_source_without_the_finalizer_gets_it_and_nothing_is_copied_yet(self):
        obj = source("team-a")
        del obj["metadata"]["finalizers"]
        with FakeHost(["default", "team-a"], [copy.deepcopy(obj)]) as host:
            self.assertEqual(reconcile(obj), wit.Action_Done())
        self.assertEqual(
            host.calls,
            [("patch", "default", "settings", [
                {"op": "test", "path": "/metadata/resourceVersion", "value": "7"},
                {"op": "add", "path": "/metadata/finalizers", "value": [FINALIZER]},
            ])],
        )
        stored = host.objects[("default", "settings")]
        self.assertEqual(stored["metadata"]["finalizers"], [FINALIZER])

    def test_new_copies_are_created_copies_applied_and_copies_no_longer_listed_deleted(self):
        with FakeHost(
            ["default", "team-a", "team-b", "team-c"], [copy_in("team-b"), copy_in("team-c")]
        ) as host:
            self.assertEqual(reconcile(source("team-a, team-b")), wit.Action_Done())
        self.assertEqual(
            [call[:3] for call in host.calls],
            [("create", "team-a", "settings"), ("apply", "team-b", "settings"),
             ("get", "team-c", "settings"), ("delete", "team-c", "settings")],
        )
        self.assertEqual(host.objects[("team-b", "settings")], copy_in("team-b"))
        self.assertIn(
            ("INFO",
             "deleted the copy of v1 ConfigMap default/settings in team-c, no longer listed"),
            host.logs,
        )

    def test_namespaces_that_do_not_accept_copies_and_objects_not_its_copies_are_left_alone(self):
        foreign = {"apiVersion": "v1", "kind": "ConfigMap",
                   "metadata": {"name": "settings", "namespace": "team-b"}, "data": {"x": "y"}}
        with FakeHost(
            ["default", "team-a", "team-b", "kube-system"], [foreign], refusing=["kube-system"]
        ) as host:
            action = reconcile(source("team-a, team-b, kube-system"))
        self.assertEqual(action, wit.Action_RequeueAfter(30_000))
        self.assertEqual([call[:3] for call in host.calls], [("create", "team-a", "settings")])
        self.assertEqual(host.objects[("team-b", "settings")], foreign)
        self.assertNotIn(("kube-system", "settings"), host.objects)
        self.assertEqual(
            [(reason, note) for _, _, reason, note in host.events],
            [("NamespaceNotAccepting", "Not copied to namespaces without the label "
              "replicator.example.com/accept-copies=true: kube-system; retrying in 30s"),
             ("NotACopy", "Not copied to namespaces holding a ConfigMap of this name that is "
              "not its copy: team-b; retrying in 30s")],
        )

    def test_a_deleted_source_deletes_only_its_copies(self):
        deleting = source("team-a, team-b", deletionTimestamp="2026-01-01T00:00:00Z")
        foreign = {"apiVersion": "v1", "kind": "ConfigMap",
                   "metadata": {"name": "settings", "namespace": "team-b"}, "data": {"x": "y"}}
        with FakeHost(
            ["default", "team-a", "team-b"], [copy.deepcopy(deleting), copy_in("team-a"), foreign]
        ) as host:
            self.assertEqual(reconcile(deleting), wit.Action_Done())
        self.assertNotIn(("team-a", "settings"), host.objects)
        self.assertEqual(host.objects[("team-b", "settings")], foreign)
        self.assertNotIn(("delete", "team-b", "settings"), [c[:3] for c in host.calls])

    def test_a_missing_namespace_is_a_warning_event_and_a_requeue_after_30_s(self):
        with FakeHost(["default", "team-a"]) as host:
            action = reconcile(source("team-a, team-x, team-y"))
        self.assertEqual(action, wit.Action_RequeueAfter(30_000))
        self.assertEqual(host.objects[("team-a", "settings")], copy_in("team-a"))
        self.assertEqual(len(host.events), 1)
        event_type, regarding, reason, note = host.events[0]
        self.assertEqual((event_type, reason), ("WARNING", "NamespaceNotFound"))
        self.assertEqual((regarding.namespace, regarding.name), ("default", "settings"))
        self.assertEqual(
            note, "Cannot copy to namespaces that do not exist: team-x, team-y; retrying in 30s"
        )

    def test_the_retry_delay_comes_from_the_manifest_env(self):
        with mock.patch.dict(os.environ, {"REPLICATOR_RETRY_SECONDS": "5"}):
            with FakeHost(["default"]) as host:
                action = reconcile(source("team-x"))
        self.assertEqual(action, wit.Action_RequeueAfter(5_000))
        self.assertTrue(host.events[0][3].endswith("; retrying in 5s"), host.events)

    def test_a_retry_delay_that_is_not_whole_seconds_is_a_reconcile_error(self):
        with mock.patch.dict(os.environ, {"REPLICATOR_RETRY_SECONDS": "soon"}):
            with FakeHost(["default"]):
                with self.assertRaises(Err) as raised:
                    reconcile(source("team-x"))
        self.assertEqual(
            raised.exception.value.message,
            "REPLICATOR_RETRY_SECONDS='soon' in the manifest's env: expected whole seconds",
        )

    def test_a_deleted_source_loses_every_copy_then_its_finalizer(self):
        deleting = source("team-a", deletionTimestamp="2026-01-01T00:00:00Z")
        with FakeHost(
            ["default", "team-a", "team-c"],
            [copy.deepcopy(deleting), copy_in("team-a"), copy_in("team-c")],
        ) as host:
            self.assertEqual(reconcile(deleting), wit.Action_Done())
        self.assertEqual(
            [call[:3] for call in host.calls],
            [("get", "team-a", "settings"), ("delete", "team-a", "settings"),
             ("get", "team-c", "settings"), ("delete", "team-c", "settings"),
             ("patch", "default", "settings")],
        )
        self.assertEqual(host.objects[("default", "settings")]["metadata"]["finalizers"], [])

    def test_a_gone_source_needs_nothing(self):
        with FakeHost([]) as host:
            self.assertEqual(reconcile(None), wit.Action_Done())
        self.assertEqual(host.calls, [])

    def test_a_denied_call_is_a_reconcile_error_naming_the_missing_grant(self):
        with FakeHost(["default", "team-a", "team-c"], [copy_in("team-c")]) as host:
            host.denied.add("delete")
            with self.assertRaises(Err) as raised:
                reconcile(source("team-a"))
        error = raised.exception.value
        self.assertIsInstance(error, wit.ReconcileError)
        self.assertEqual(
            error.message,
            "failed to delete v1 ConfigMap team-c/settings: the plugin may not make the call: "
            "plugin `test` has no grant to `delete` v1 ConfigMap in namespace `team-c`",
        )

    def test_a_failed_copy_names_the_namespace_and_the_cause(self):
        with FakeHost(["default", "team-a"], [copy_in("team-a")]) as host:
            host.denied.add("patch")
            with self.assertRaises(Err) as raised:
                reconcile(source("team-a"))
        self.assertTrue(
            raised.exception.value.message.startswith(
                "failed to copy to team-a: failed to apply v1 ConfigMap team-a/settings: "
                "the plugin may not make the call: "
            ),
            raised.exception.value.message,
        )


if __name__ == "__main__":
    unittest.main()
