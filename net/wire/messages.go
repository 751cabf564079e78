package wire

import "github.com/twmb/franz-go/pkg/kerr"

// messages are Kafka's own messages (Errors.java) where they differ from the
// descriptions kerr carries: those a group of DeleteGroups can get (KIP-1331).
var messages = map[int16]string{
	kerr.UnknownServerError.Code:        "The server experienced an unexpected error when processing the request.",
	kerr.CoordinatorLoadInProgress.Code: "The coordinator is loading and hence can't process requests.",
	kerr.CoordinatorNotAvailable.Code:   "The coordinator is not available.",
	kerr.NotCoordinator.Code:            "This is not the correct coordinator.",
	kerr.InvalidGroupID.Code:            "The configured groupId is invalid.",
	kerr.GroupAuthorizationFailed.Code:  "Group authorization failed.",
	kerr.NonEmptyGroup.Code:             "The group is not empty.",
	kerr.GroupIDNotFound.Code:           "The group id does not exist.",
}

// ErrorMessage is the ErrorMessage Kafka answers with code: its message (Errors.java),
// else kerr's description; nil for success.
func ErrorMessage(code int16) *string {
	if code == 0 {
		return nil
	}
	if m, ok := messages[code]; ok {
		return &m
	}
	if e, ok := kerr.ErrorForCode(code).(*kerr.Error); ok {
		m := e.Description
		return &m
	}
	return nil
}

// MessageOr is an answer's ErrorMessage: msg, else the code's description.
func MessageOr(code int16, msg string) *string {
	if msg == "" {
		if e, ok := kerr.ErrorForCode(code).(*kerr.Error); ok {
			msg = e.Description
		}
	}
	return &msg
}
