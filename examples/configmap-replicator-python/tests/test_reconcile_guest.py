"""Unit tests of the helper layer over the generated bindings."""

from __future__ import annotations

import unittest
from datetime import timedelta

from wit_world.imports import types as wit

from reconcile_guest import (
    ConflictError,
    DeniedError,
    Kind,
    NotFoundError,
    ObjectRef,
    ReconcileError,
    describe,
    done,
    export_reconciler,
    requeue_after,
)
from reconcile_guest.errors import call_error
from reconcile_guest.finalizer import AddFinalizer, Apply, Cleanup, Nothing, plan

NAME = "example.com/cleanup"


def obj(**metadata: object) -> dict:
    return {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": "web", "namespace": "default", **metadata},
    }


class Errors(unittest.TestCase):
    def test_call_errors_are_typed_and_say_what_was_being_done(self):
        denied = call_error("failed to get v1 Secret default/x", wit.CallError_Denied("no grant"))
        self.assertIsInstance(denied, DeniedError)
        self.assertEqual(
            str(denied),
            "failed to get v1 Secret default/x: the plugin's grants do not allow the call: "
            "no grant",
        )
        status = wit.ApiStatus(code=404, reason="NotFound", message='configmaps "x" not found')
        missing = call_error("failed to delete it", wit.CallError_Api(status))
        self.assertIsInstance(missing, NotFoundError)
        self.assertEqual((missing.code, missing.reason), (404, "NotFound"))
        self.assertEqual(
            str(missing),
            "failed to delete it: the API server refused the call (404 NotFound): "
            'configmaps "x" not found',
        )
        conflict = wit.CallError_Api(wit.ApiStatus(409, "Conflict", "modified"))
        self.assertIsInstance(call_error("x", conflict), ConflictError)

    def test_describe_joins_the_chain_of_causes_outermost_first(self):
        try:
            try:
                raise call_error("failed to apply it", wit.CallError_Unavailable("timed out"))
            except Exception as error:
                raise ReconcileError("failed to copy to team-a") from error
        except ReconcileError as error:
            self.assertEqual(
                describe(error),
                "failed to copy to team-a: failed to apply it: the API server could not be "
                "reached: timed out",
            )

    def test_describe_names_a_bug_by_its_type_and_where_it_was_raised(self):
        try:
            {}["data"]
        except KeyError as error:
            text = describe(error)
        self.assertRegex(text, r"^KeyError: 'data' \(test_reconcile_guest\.py:\d+ in test_describe")


class Actions(unittest.TestCase):
    def test_requeue_after_takes_seconds_or_a_timedelta_as_milliseconds(self):
        self.assertEqual(requeue_after(30), wit.Action_RequeueAfter(30_000))
        self.assertEqual(requeue_after(timedelta(milliseconds=1500)), wit.Action_RequeueAfter(1500))
        with self.assertRaises(ValueError):
            requeue_after(-1)
        with self.assertRaises(ValueError):
            requeue_after(timedelta(days=50))


class Objects(unittest.TestCase):
    def test_object_refs_read_an_object_and_print_like_the_host(self):
        ref = ObjectRef.of(obj())
        self.assertEqual(ref, ObjectRef(Kind("v1", "ConfigMap"), "default", "web"))
        self.assertEqual(str(ref), "v1 ConfigMap default/web")
        namespace = {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "team-a"}}
        self.assertEqual(str(ObjectRef.of(namespace)), "v1 Namespace team-a")
        self.assertEqual(Kind("apps/v1", "Deployment").group, "apps")
        with self.assertRaisesRegex(ReconcileError, "metadata.name"):
            ObjectRef.of({"apiVersion": "v1", "kind": "ConfigMap"})


class FinalizerPlan(unittest.TestCase):
    def test_live_object_with_the_finalizer_is_applied(self):
        self.assertEqual(plan(obj(finalizers=["other", NAME]), NAME), Apply())

    def test_live_object_without_finalizers_gets_one_guarded_by_its_version(self):
        self.assertEqual(
            plan(obj(resourceVersion="42"), NAME),
            AddFinalizer([
                {"op": "test", "path": "/metadata/resourceVersion", "value": "42"},
                {"op": "add", "path": "/metadata/finalizers", "value": [NAME]},
            ]),
        )

    def test_live_object_with_other_finalizers_gets_ours_appended_guarded_by_the_list(self):
        self.assertEqual(
            plan(obj(resourceVersion="42", finalizers=["other"]), NAME),
            AddFinalizer([
                {"op": "test", "path": "/metadata/finalizers", "value": ["other"]},
                {"op": "add", "path": "/metadata/finalizers/-", "value": NAME},
            ]),
        )

    def test_deleting_object_with_the_finalizer_is_cleaned_up_then_the_finalizer_removed(self):
        deleting = obj(deletionTimestamp="2025-01-01T00:00:00Z", finalizers=["first", NAME, "last"])
        self.assertEqual(
            plan(deleting, NAME),
            Cleanup([
                {"op": "test", "path": "/metadata/finalizers", "value": ["first", NAME, "last"]},
                {"op": "remove", "path": "/metadata/finalizers/1"},
            ]),
        )

    def test_deleting_object_without_the_finalizer_needs_nothing(self):
        self.assertEqual(plan(obj(deletionTimestamp="2025-01-01T00:00:00Z"), NAME), Nothing())
        self.assertEqual(plan(obj(deletionTimestamp=None, finalizers=[NAME]), NAME), Apply())


def request() -> wit.Request:
    target = wit.ObjectRef(wit.Kind("v1", "ConfigMap"), "default", "web")
    return wit.Request(target, '{"metadata": {"name": "web"}}', 0)


class Export(unittest.TestCase):
    def test_an_action_is_returned_and_an_exception_becomes_the_reconcile_error(self):
        self.assertEqual(export_reconciler(lambda request: done())().reconcile(request()), done())

        def failing(request):
            raise KeyError("spec")

        with self.assertRaises(Exception) as raised:
            export_reconciler(failing)().reconcile(request())
        self.assertTrue(raised.exception.value.message.startswith("KeyError: 'spec'"))

    def test_a_return_that_is_not_an_action_names_the_type_the_function_and_the_fix(self):
        def reconcile(request):
            return "done"

        with self.assertRaises(TypeError) as raised:
            export_reconciler(reconcile)().reconcile(request())
        message = str(raised.exception)
        self.assertIn("reconcile (", message)
        self.assertIn(
            "returned str ('done') where an Action was expected; return done(), requeue() or "
            "requeue_after(seconds) from reconcile_guest",
            message,
        )

    def test_exporting_something_that_is_not_a_function_fails_at_import(self):
        with self.assertRaises(TypeError) as raised:
            export_reconciler("reconcile")
        self.assertIn("export_reconciler takes the reconcile function, got str", str(raised.exception))


if __name__ == "__main__":
    unittest.main()
