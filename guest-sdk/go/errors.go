package guest

import (
	"errors"
	"fmt"
)

// Sentinel errors for errors.Is on what a host call returned.
var (
	// ErrDenied: the plugin's manifest does not grant the call; the API server was not contacted.
	ErrDenied = errors.New("the plugin may not make the call")
	// ErrInvalid: the arguments were malformed; the API server was not contacted.
	ErrInvalid = errors.New("the call's arguments are invalid")
	// ErrUnavailable: the API server could not be reached or did not answer in time.
	ErrUnavailable = errors.New("the API server is unavailable")
	// ErrNotFound: the API server answered 404.
	ErrNotFound = errors.New("not found")
	// ErrConflict: the API server answered 409 (a stale resourceVersion, or AlreadyExists).
	ErrConflict = errors.New("conflict")
	// ErrAlreadyExists: the API server answered 409 with reason AlreadyExists (create).
	ErrAlreadyExists = errors.New("already exists")
)

// APIStatus is the status the API server refused a call with (a metav1.Status). Get it with
// errors.As(err, &status) where status is a *APIStatus.
type APIStatus struct {
	// Code is the HTTP status: 404, 409, 422, 403, ...
	Code uint16
	// Reason is the machine-readable reason: "NotFound", "Conflict", "AlreadyExists", "Invalid".
	Reason string
	// Message is the API server's human-readable message.
	Message string
}

func (s *APIStatus) Error() string {
	return fmt.Sprintf("the API server refused the call: %d %s: %s", s.Code, s.Reason, s.Message)
}

// Is makes errors.Is(err, ErrNotFound), ErrConflict and ErrAlreadyExists match by code and reason.
func (s *APIStatus) Is(target error) bool {
	switch target {
	case ErrNotFound:
		return s.Code == 404
	case ErrConflict:
		return s.Code == 409
	case ErrAlreadyExists:
		return s.Code == 409 && s.Reason == "AlreadyExists"
	}
	return false
}

// CallErrorKind is the case of the WIT `call-error` variant.
type CallErrorKind uint8

const (
	// CallDenied is `call-error::denied`.
	CallDenied CallErrorKind = iota
	// CallInvalid is `call-error::invalid`.
	CallInvalid
	// CallAPI is `call-error::api`.
	CallAPI
	// CallUnavailable is `call-error::unavailable`.
	CallUnavailable
)

// CallError is why a host import failed (the WIT `call-error`). errors.Is matches ErrDenied,
// ErrInvalid, ErrUnavailable and, through the status, ErrNotFound, ErrConflict and
// ErrAlreadyExists; errors.As finds the *APIStatus.
type CallError struct {
	Kind CallErrorKind
	// Message is the host's explanation (denied, invalid, unavailable).
	Message string
	// Status is set when Kind is CallAPI.
	Status *APIStatus
}

func (e *CallError) Error() string {
	switch e.Kind {
	case CallDenied:
		return ErrDenied.Error() + ": " + e.Message
	case CallInvalid:
		return ErrInvalid.Error() + ": " + e.Message
	case CallUnavailable:
		return ErrUnavailable.Error() + ": " + e.Message
	default:
		return e.Status.Error()
	}
}

// Is matches the sentinel of the error's kind.
func (e *CallError) Is(target error) bool {
	switch e.Kind {
	case CallDenied:
		return target == ErrDenied
	case CallInvalid:
		return target == ErrInvalid
	case CallUnavailable:
		return target == ErrUnavailable
	}
	return false
}

// Unwrap gives the API status of a CallAPI error to errors.Is and errors.As.
func (e *CallError) Unwrap() error {
	if e.Status == nil {
		return nil
	}
	return e.Status
}

// Denied, Invalid, Unavailable and API build call errors (for fake hosts and tests).
func Denied(message string) error      { return &CallError{Kind: CallDenied, Message: message} }
func Invalid(message string) error     { return &CallError{Kind: CallInvalid, Message: message} }
func Unavailable(message string) error { return &CallError{Kind: CallUnavailable, Message: message} }
func API(code uint16, reason, message string) error {
	return &CallError{Kind: CallAPI, Status: &APIStatus{Code: code, Reason: reason, Message: message}}
}
