// DeleteGroups (key 42), versions 0-2.
//
// Deletes empty groups with their committed offsets (tombstones in
// __consumer_offsets); answers once the tombstones are durable. Groups with members
// get NON_EMPTY_GROUP, unknown ones GROUP_ID_NOT_FOUND.

package kafka

import "github.com/twmb/franz-go/pkg/kmsg"

func init() {
	register(API{Key: 42, MinVersion: 0, MaxVersion: 2, Handle: handleDeleteGroups})
}

func handleDeleteGroups(b *Broker, r *Request) {
	req := r.Body.(*kmsg.DeleteGroupsRequest)
	c := b.groupCoordinatorOr(func(code int16) {
		resp := kmsg.NewPtrDeleteGroupsResponse()
		resp.Version = req.Version
		for _, g := range req.Groups {
			resp.Groups = append(resp.Groups, kmsg.DeleteGroupsResponseGroup{Group: g, ErrorCode: code})
		}
		r.Respond(resp)
	})
	if c == nil {
		return
	}
	c.DeleteGroups(req, func(resp *kmsg.DeleteGroupsResponse) { r.Respond(resp) })
}
