package wire

import (
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// The reflective error walk finds codes at every depth of a kmsg answer.
func TestErrorWalkerDepths(t *testing.T) {
	resp := kmsg.NewPtrOffsetCommitResponse()
	for _, codes := range [][]int16{{0, 3}, {29}} {
		rt := kmsg.NewOffsetCommitResponseTopic()
		for _, c := range codes {
			p := kmsg.NewOffsetCommitResponseTopicPartition()
			p.ErrorCode = c
			rt.Partitions = append(rt.Partitions, p)
		}
		resp.Topics = append(resp.Topics, rt)
	}
	var got codeList
	ErrorCodes(resp, &got)
	if len(got) != 3 || got[0] != 0 || got[1] != 3 || got[2] != 29 {
		t.Fatalf("codes %v", got)
	}
	if !HasErrorCodes(kmsg.NewPtrApiVersionsResponse()) {
		t.Fatal("ApiVersions' top-level ErrorCode not found")
	}
}

type codeList []int16

func (l *codeList) CountError(c int16) { *l = append(*l, c) }
