package protocol

import (
	"errors"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/regent-broker/regent/actors/acls"
	"github.com/regent-broker/regent/actors/topics"
)

// errorCode maps an error to Kafka's code: a *kerr.Error (possibly wrapped)
// keeps its code; anything else is UNKNOWN_SERVER_ERROR.
func errorCode(err error) int16 {
	if err == nil {
		return 0
	}
	var ke *kerr.Error
	if errors.As(err, &ke) {
		return ke.Code
	}
	return kerr.UnknownServerError.Code
}

// errorMessage is the message to send beside a code, or nil.
func errorMessage(err error) *string {
	if err == nil {
		return nil
	}
	var te *topics.Error
	if errors.As(err, &te) {
		return &te.Msg
	}
	var ae *acls.Error
	if errors.As(err, &ae) {
		return &ae.Msg
	}
	msg := err.Error()
	return &msg
}
