//! The retry policy as pure functions: which requests retry on which outcomes, and after how long.
//!
//! The table of verbs × outcomes, and the reasons for it, is in the [client module docs](super).

use std::time::Duration;

use http::{Method, StatusCode};

use super::ClientLimits;

/// What a request is, for deciding whether repeating it is safe.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum RequestClass {
    /// A watch: long-running, resumed by kube's watcher, never retried here.
    Watch,
    /// A read (GET, HEAD, OPTIONS): repeating it changes nothing.
    Read,
    /// A write whose repetition has the same effect (PUT, DELETE, apply and merge patches). A
    /// repeat after a success the client did not see answers 409 Conflict (PUT with a
    /// resourceVersion) or 404 (DELETE), which callers already handle.
    IdempotentWrite,
    /// A write that may act twice (POST create, JSON patch, strategic merge patch, unknown verbs).
    NonIdempotentWrite,
}

/// Classifies a request from its method, URI query and `Content-Type`.
pub(crate) fn classify(
    method: &Method,
    query: Option<&str>,
    content_type: Option<&str>,
) -> RequestClass {
    let watch = query.is_some_and(|q| {
        q.split('&')
            .any(|pair| pair == "watch=true" || pair == "watch=1")
    });
    if watch {
        return RequestClass::Watch;
    }
    match *method {
        Method::GET | Method::HEAD | Method::OPTIONS => RequestClass::Read,
        Method::PUT | Method::DELETE => RequestClass::IdempotentWrite,
        Method::PATCH => {
            let media = content_type
                .and_then(|c| c.split(';').next())
                .map(str::trim)
                .unwrap_or_default();
            if media.eq_ignore_ascii_case("application/apply-patch+yaml")
                || media.eq_ignore_ascii_case("application/merge-patch+json")
            {
                RequestClass::IdempotentWrite
            } else {
                RequestClass::NonIdempotentWrite
            }
        }
        _ => RequestClass::NonIdempotentWrite,
    }
}

/// How one attempt ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Outcome<'a> {
    /// The server answered.
    Response {
        /// The status code.
        status: StatusCode,
        /// The `Retry-After` header, when present and readable as text.
        retry_after: Option<&'a str>,
    },
    /// The connection was refused: the request never left the client.
    ConnectRefused,
    /// Any other transport error; the request may have reached the server.
    TransportError,
}

/// Why a request is retried; each reason has its own counter in
/// [`ClientStats`](super::ClientStats).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum RetryReason {
    /// 429 Too Many Requests.
    TooManyRequests,
    /// 500, 502, 503 or 504.
    ServerError,
    /// The connection was refused before the request was sent.
    ConnectRefused,
}

/// What to do after an attempt.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Decision {
    /// Send the request again after waiting `after`.
    Retry {
        /// How long to wait first.
        after: Duration,
        /// Why.
        reason: RetryReason,
    },
    /// Hand this outcome to the caller: success, or an error retrying cannot fix.
    Return,
    /// Hand this outcome to the caller: it was retryable but `max_retries` are used up.
    Exhausted(RetryReason),
}

/// Decides what follows an attempt of a `class` request that ended in `outcome`, after
/// `retries_done` retries. `jitter` in `[0, 1)` spreads exponential delays over
/// `[d/2, d]` ("equal jitter"), so clients that failed together do not retry together, yet
/// never wait less than half the backoff nor more than `backoff_max`.
///
/// A 429 waits `Retry-After` seconds, capped at `backoff_max`; a missing `Retry-After`, or one in
/// HTTP-date form (the API server always sends seconds), is treated as absent and the exponential
/// backoff applies instead. A 5xx with `Retry-After` (the API server sends one with some 503s and
/// 504s) honours it the same way. A write answered 500 is retried only with a `Retry-After`.
pub(crate) fn decide(
    class: RequestClass,
    outcome: Outcome<'_>,
    retries_done: u32,
    limits: &ClientLimits,
    jitter: f64,
) -> Decision {
    if class == RequestClass::Watch {
        return Decision::Return;
    }
    let (reason, retry_after) = match outcome {
        // A write answered 500 without `Retry-After` is most often refused for what it carries
        // (a webhook, a validation the server could not express otherwise): sending it again
        // repeats the refusal. client-go retries it only when the server asks to.
        Outcome::Response {
            status: StatusCode::INTERNAL_SERVER_ERROR,
            retry_after,
        } if class != RequestClass::Read && retry_after.and_then(parse_retry_after).is_none() => {
            return Decision::Return;
        }
        Outcome::Response {
            status: StatusCode::TOO_MANY_REQUESTS,
            retry_after,
        } => (RetryReason::TooManyRequests, retry_after),
        Outcome::Response {
            status:
                StatusCode::INTERNAL_SERVER_ERROR
                | StatusCode::BAD_GATEWAY
                | StatusCode::SERVICE_UNAVAILABLE
                | StatusCode::GATEWAY_TIMEOUT,
            retry_after,
        } if class != RequestClass::NonIdempotentWrite => (RetryReason::ServerError, retry_after),
        Outcome::ConnectRefused => (RetryReason::ConnectRefused, None),
        Outcome::Response { .. } | Outcome::TransportError => return Decision::Return,
    };
    if retries_done >= limits.max_retries {
        return Decision::Exhausted(reason);
    }
    let after = match retry_after.and_then(parse_retry_after) {
        Some(server) => server.min(limits.backoff_max),
        None => jittered(limits.exponential_delay(retries_done), jitter),
    };
    Decision::Retry { after, reason }
}

/// Parses a `Retry-After` value given in seconds; `None` for anything else (an HTTP-date, junk).
pub(crate) fn parse_retry_after(value: &str) -> Option<Duration> {
    value.trim().parse::<u64>().ok().map(Duration::from_secs)
}

/// `delay × (1 - jitter / 2)`: within `[delay/2, delay]` for `jitter` in `[0, 1)`.
fn jittered(delay: Duration, jitter: f64) -> Duration {
    delay.mul_f64(1.0 - jitter.clamp(0.0, 1.0) / 2.0)
}

#[cfg(test)]
mod tests {
    use super::*;

    const MS: fn(u64) -> Duration = Duration::from_millis;

    fn limits() -> ClientLimits {
        ClientLimits::default()
            .max_retries(3)
            .backoff_base(MS(100))
            .backoff_max(Duration::from_secs(5))
    }

    fn status(code: u16) -> Outcome<'static> {
        Outcome::Response {
            status: StatusCode::from_u16(code).expect("valid code"),
            retry_after: None,
        }
    }

    fn throttled(retry_after: &str) -> Outcome<'_> {
        Outcome::Response {
            status: StatusCode::TOO_MANY_REQUESTS,
            retry_after: Some(retry_after),
        }
    }

    fn class(method: Method) -> RequestClass {
        classify(&method, None, None)
    }

    #[test]
    fn requests_are_classified_by_verb_watch_query_and_patch_type() {
        use RequestClass::*;
        assert_eq!(class(Method::GET), Read);
        assert_eq!(class(Method::HEAD), Read);
        assert_eq!(class(Method::PUT), IdempotentWrite);
        assert_eq!(class(Method::DELETE), IdempotentWrite);
        assert_eq!(class(Method::POST), NonIdempotentWrite);
        let patch = |ct| classify(&Method::PATCH, None, Some(ct));
        assert_eq!(patch("application/apply-patch+yaml"), IdempotentWrite);
        assert_eq!(
            patch("application/merge-patch+json; charset=utf-8"),
            IdempotentWrite
        );
        assert_eq!(patch("application/json-patch+json"), NonIdempotentWrite);
        assert_eq!(
            patch("application/strategic-merge-patch+json"),
            NonIdempotentWrite
        );
        assert_eq!(classify(&Method::PATCH, None, None), NonIdempotentWrite);
        let get = |q| classify(&Method::GET, Some(q), None);
        assert_eq!(get("watch=true&resourceVersion=5"), Watch);
        assert_eq!(get("labelSelector=a&watch=1"), Watch);
        assert_eq!(get("watch=false"), Read);
        assert_eq!(get("allowWatchBookmarks=true"), Read);
    }

    #[test]
    fn too_many_requests_waits_retry_after_for_every_verb() {
        for method in [
            Method::GET,
            Method::PUT,
            Method::DELETE,
            Method::POST,
            Method::PATCH,
        ] {
            assert_eq!(
                decide(class(method.clone()), throttled("2"), 0, &limits(), 0.7),
                Decision::Retry {
                    after: Duration::from_secs(2),
                    reason: RetryReason::TooManyRequests
                },
                "{method}"
            );
        }
    }

    #[test]
    fn retry_after_is_capped_at_backoff_max() {
        assert_eq!(
            decide(RequestClass::Read, throttled("3600"), 0, &limits(), 0.0),
            Decision::Retry {
                after: Duration::from_secs(5),
                reason: RetryReason::TooManyRequests
            }
        );
    }

    #[test]
    fn too_many_requests_without_seconds_falls_back_to_exponential_backoff() {
        let date = throttled("Wed, 21 Oct 2015 07:28:00 GMT");
        let missing = status(429);
        for (outcome, retries_done, expected) in [(date, 0, MS(100)), (missing, 2, MS(400))] {
            assert_eq!(
                decide(RequestClass::Read, outcome, retries_done, &limits(), 0.0),
                Decision::Retry {
                    after: expected,
                    reason: RetryReason::TooManyRequests
                }
            );
        }
    }

    #[test]
    fn retry_after_parses_whole_seconds_only() {
        assert_eq!(parse_retry_after("0"), Some(Duration::ZERO));
        assert_eq!(parse_retry_after(" 7 "), Some(Duration::from_secs(7)));
        assert_eq!(parse_retry_after("1.5"), None);
        assert_eq!(parse_retry_after("-1"), None);
        assert_eq!(parse_retry_after("Wed, 21 Oct 2015 07:28:00 GMT"), None);
    }

    #[test]
    fn server_errors_retry_reads_and_idempotent_writes_with_doubling_backoff() {
        for code in [500, 502, 503, 504] {
            for class in [RequestClass::Read, RequestClass::IdempotentWrite] {
                if code == 500 && class == RequestClass::IdempotentWrite {
                    continue; // retried only when the server asks to (next test)
                }
                let delays: Vec<_> = (0..3)
                    .map(|n| decide(class, status(code), n, &limits(), 0.0))
                    .collect();
                let retry = |ms| Decision::Retry {
                    after: MS(ms),
                    reason: RetryReason::ServerError,
                };
                assert_eq!(
                    delays,
                    [retry(100), retry(200), retry(400)],
                    "{code} {class:?}"
                );
            }
        }
    }

    #[test]
    fn a_write_answered_500_is_retried_only_when_the_server_sends_retry_after() {
        let with_retry_after = Outcome::Response {
            status: StatusCode::INTERNAL_SERVER_ERROR,
            retry_after: Some("2"),
        };
        let with_a_date = Outcome::Response {
            status: StatusCode::INTERNAL_SERVER_ERROR,
            retry_after: Some("Wed, 21 Oct 2026 07:28:00 GMT"),
        };
        for class in [
            RequestClass::IdempotentWrite,
            RequestClass::NonIdempotentWrite,
        ] {
            assert_eq!(
                decide(class, status(500), 0, &limits(), 0.0),
                Decision::Return,
                "{class:?}"
            );
            assert_eq!(
                decide(class, with_a_date, 0, &limits(), 0.0),
                Decision::Return,
                "{class:?}"
            );
        }
        assert_eq!(
            decide(
                RequestClass::IdempotentWrite,
                with_retry_after,
                0,
                &limits(),
                0.0
            ),
            Decision::Retry {
                after: Duration::from_secs(2),
                reason: RetryReason::ServerError
            }
        );
        // Reads retry a 500 as before.
        assert!(matches!(
            decide(RequestClass::Read, status(500), 0, &limits(), 0.0),
            Decision::Retry { .. }
        ));
    }

    #[test]
    fn server_errors_never_retry_a_create_or_non_idempotent_patch() {
        for code in [500, 502, 503, 504] {
            assert_eq!(
                decide(
                    RequestClass::NonIdempotentWrite,
                    status(code),
                    0,
                    &limits(),
                    0.0
                ),
                Decision::Return
            );
        }
    }

    #[test]
    fn jitter_keeps_the_delay_between_half_and_all_of_the_backoff() {
        let at = |jitter| decide(RequestClass::Read, status(503), 1, &limits(), jitter);
        let after = |d| match d {
            Decision::Retry { after, .. } => after,
            other => panic!("expected a retry, got {other:?}"),
        };
        assert_eq!(after(at(0.0)), MS(200));
        assert_eq!(after(at(0.5)), MS(150));
        let nearly_one = after(at(0.999_999));
        assert!(
            nearly_one > MS(100) && nearly_one < MS(101),
            "{nearly_one:?}"
        );
    }

    #[test]
    fn refused_connection_retries_every_verb_because_nothing_was_sent() {
        for class in [
            RequestClass::Read,
            RequestClass::IdempotentWrite,
            RequestClass::NonIdempotentWrite,
        ] {
            assert_eq!(
                decide(class, Outcome::ConnectRefused, 1, &limits(), 0.0),
                Decision::Retry {
                    after: MS(200),
                    reason: RetryReason::ConnectRefused
                }
            );
        }
    }

    #[test]
    fn watches_are_never_retried() {
        for outcome in [throttled("1"), status(500), Outcome::ConnectRefused] {
            assert_eq!(
                decide(RequestClass::Watch, outcome, 0, &limits(), 0.0),
                Decision::Return
            );
        }
    }

    #[test]
    fn success_client_errors_and_other_transport_errors_are_returned() {
        for outcome in [
            status(200),
            status(201),
            status(404),
            status(409),
            status(501),
            Outcome::TransportError,
        ] {
            assert_eq!(
                decide(RequestClass::Read, outcome, 0, &limits(), 0.0),
                Decision::Return,
                "{outcome:?}"
            );
        }
    }

    #[test]
    fn retries_stop_after_max_retries_naming_the_reason() {
        assert!(matches!(
            decide(RequestClass::Read, status(500), 2, &limits(), 0.0),
            Decision::Retry { .. }
        ));
        assert_eq!(
            decide(RequestClass::Read, status(500), 3, &limits(), 0.0),
            Decision::Exhausted(RetryReason::ServerError)
        );
        assert_eq!(
            decide(RequestClass::Read, throttled("1"), 3, &limits(), 0.0),
            Decision::Exhausted(RetryReason::TooManyRequests)
        );
        let no_retries = limits().max_retries(0);
        assert_eq!(
            decide(
                RequestClass::Read,
                Outcome::ConnectRefused,
                0,
                &no_retries,
                0.0
            ),
            Decision::Exhausted(RetryReason::ConnectRefused)
        );
    }
}
